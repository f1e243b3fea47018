"""Intent classifier for a support chatbot (distributed, gloo).

Usage: torchrun --nproc_per_node=2 --standalone intent_train.py [key=value ...]
       e.g.  torchrun ... intent_train.py model=bag epochs=3 lr=0.003
"""
import dataclasses
import os
import sys
import time
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

INTENTS = ["billing", "cancel", "delivery", "refund", "login", "upgrade"]


@dataclass
class Config:
    model: str = "bag"
    vocab_size: int = 500
    seq_len: int = 20
    dim: int = 48
    n_train: int = 1200
    batch_size: int = 24
    epochs: int = 2
    lr: float = 3e-3
    seed: int = 11
    out_dir: str = "outputs/intent"
    intents: list = field(default_factory=lambda: list(INTENTS))

    @classmethod
    def from_argv(cls, argv):
        cfg = cls()
        for item in argv:
            key, _, value = item.partition("=")
            f = {f.name: f for f in dataclasses.fields(cls)}[key]
            setattr(cfg, key, value if f.type is str else type(getattr(cfg, key))(value))
        return cfg


MODELS = {}


def register(name):
    def deco(cls):
        MODELS[name] = cls
        return cls
    return deco


@register("bag")
class BagOfEmbeddings(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.emb = nn.EmbeddingBag(cfg.vocab_size, cfg.dim, mode="mean", padding_idx=0)
        self.mlp = nn.Sequential(nn.Linear(cfg.dim, cfg.dim), nn.Tanh(), nn.Linear(cfg.dim, len(cfg.intents)))

    def forward(self, tokens):
        return self.mlp(self.emb(tokens))


@register("cnn")
class TextCNN(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.emb = nn.Embedding(cfg.vocab_size, cfg.dim, padding_idx=0)
        self.convs = nn.ModuleList(nn.Conv1d(cfg.dim, cfg.dim, k, padding=k // 2) for k in (2, 3, 4))
        self.out = nn.Linear(3 * cfg.dim, len(cfg.intents))

    def forward(self, tokens):
        h = self.emb(tokens).transpose(1, 2)
        pooled = [F.relu(c(h)).amax(-1) for c in self.convs]
        return self.out(torch.cat(pooled, 1))


def synth_utterances(cfg):
    """Fake tokenised support tickets: each intent prefers its own slice of the vocabulary."""
    g = torch.Generator().manual_seed(cfg.seed)
    names = [INTENTS[i] for i in torch.randint(0, len(INTENTS), (cfg.n_train,), generator=g)]
    names[517] = "chitchat"  # exported from the new annotation tool
    tokens = torch.zeros(cfg.n_train, cfg.seq_len, dtype=torch.long)
    lengths = torch.randint(6, cfg.seq_len + 1, (cfg.n_train,), generator=g)
    for i, name in enumerate(names):
        k = INTENTS.index(name) if name in INTENTS else 0
        lo = 1 + k * (cfg.vocab_size // len(INTENTS))
        topical = torch.randint(lo, lo + 40, (int(lengths[i]),), generator=g)
        noise = torch.randint(1, cfg.vocab_size, (int(lengths[i]),), generator=g)
        keep = torch.rand(int(lengths[i]), generator=g) < 0.6
        tokens[i, : lengths[i]] = torch.where(keep, topical, noise)
    return tokens, names


class TicketDataset(Dataset):
    def __init__(self, tokens, names, intents):
        self.tokens = tokens
        # unknown intents go to the last id
        self.labels = torch.tensor([intents.index(n) if n in intents else len(intents) for n in names])

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.tokens[i], self.labels[i]


class Meter:
    def __init__(self):
        self.loss = self.correct = self.n = 0

    def update(self, loss, logits, y):
        self.loss += loss.item() * y.numel()
        self.correct += (logits.argmax(1) == y).sum().item()
        self.n += y.numel()

    def summary(self):
        stats = torch.tensor([self.loss, self.correct, self.n], dtype=torch.float64)
        dist.all_reduce(stats)
        return {"loss": (stats[0] / stats[2]).item(), "acc": (stats[1] / stats[2]).item()}


def run(cfg):
    dist.init_process_group(backend="gloo")
    rank = dist.get_rank()
    torch.manual_seed(cfg.seed)
    tokens, names = synth_utterances(cfg)
    ds = TicketDataset(tokens, names, cfg.intents)
    sampler = DistributedSampler(ds, shuffle=True, seed=cfg.seed)
    loader = DataLoader(ds, batch_size=cfg.batch_size, sampler=sampler, drop_last=False)
    model = DDP(MODELS[cfg.model](cfg))
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    if rank == 0:
        os.makedirs(cfg.out_dir, exist_ok=True)
        print(f"config: {dataclasses.asdict(cfg)}", flush=True)
    for epoch in range(cfg.epochs):
        sampler.set_epoch(epoch)
        meter, t0 = Meter(), time.time()
        model.train()
        for tok, y in loader:
            logits = model(tok)
            loss = F.cross_entropy(logits, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            meter.update(loss, logits, y)
        sched.step()
        stats = meter.summary()
        if rank == 0:
            print(f"epoch {epoch}: loss {stats['loss']:.4f} acc {stats['acc']:.3f} "
                  f"lr {sched.get_last_lr()[0]:.5f} ({time.time() - t0:.1f}s)", flush=True)
            torch.save({"cfg": dataclasses.asdict(cfg), "model": model.module.state_dict()},
                       os.path.join(cfg.out_dir, f"{cfg.model}-e{epoch}.pt"))
    dist.destroy_process_group()


if __name__ == "__main__":
    run(Config.from_argv(sys.argv[1:]))
