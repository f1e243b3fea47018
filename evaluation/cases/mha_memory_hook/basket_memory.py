"""Customer-segment classification from shopping baskets, with an episodic memory.

Each basket is a set of 8 items (12 features each). A set encoder embeds the items; a
memory of recently seen baskets (pooled keys, label-embedding values) is read with
multi-head attention and added to the item embeddings through a forward hook on the
encoder, so the encoder itself stays a plain nn.Sequential we can reuse elsewhere.
"""
import logging
from collections import OrderedDict
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("basket")


@dataclass
class Config:
    n_items: int = 8
    item_dim: int = 12
    d_model: int = 32
    heads: int = 4
    n_segments: int = 4
    memory_size: int = 512
    batch_size: int = 32
    n_train: int = 320
    n_val: int = 96
    epochs: int = 3
    lr: float = 2e-3
    seed: int = 11


def make_baskets(n, cfg, gen):
    """Segment s buys mostly from category block s; price/quantity features are noisy."""
    segs = torch.randint(0, cfg.n_segments, (n,), generator=gen)
    x = 0.3 * torch.randn(n, cfg.n_items, cfg.item_dim, generator=gen)
    block = cfg.item_dim // cfg.n_segments
    for i, s in enumerate(segs.tolist()):
        x[i, :, s * block:(s + 1) * block] += 1.0
    return x, segs


class MeanPool(nn.Module):
    def forward(self, h):
        return h.mean(dim=1)


class EpisodicMemory(nn.Module):
    """FIFO memory of (pooled feature, label embedding) pairs, read by attention."""

    def __init__(self, cfg):
        super().__init__()
        self.size = cfg.memory_size
        self.attn = nn.MultiheadAttention(cfg.d_model, cfg.heads, batch_first=True)
        self.label_emb = nn.Embedding(cfg.n_segments, cfg.d_model)
        self.register_buffer("keys", torch.empty(0, cfg.d_model))
        self.register_buffer("values", torch.empty(0, cfg.d_model))

    def read_hook(self, module, inputs, output):
        # output: (B, n_items, d_model) item embeddings from the encoder
        if self.keys.size(0) > 0:
            b = output.size(0)
            k = self.keys.unsqueeze(0).expand(b, -1, -1)
            v = self.values.unsqueeze(0).expand(b, -1, -1)
            read, _ = self.attn(output, k, v, need_weights=False)
            output = output + read
        # remember this batch's pooled features as new keys
        self.keys = torch.cat([self.keys, output.detach().mean(dim=1)])[-self.size:]
        return output

    @torch.no_grad()
    def write_values(self, labels):
        self.values = torch.cat([self.values, self.label_emb(labels).detach()])[-self.size:]


def build_model(cfg):
    model = nn.Sequential(OrderedDict(
        encoder=nn.Sequential(nn.Linear(cfg.item_dim, cfg.d_model), nn.ReLU(),
                              nn.Linear(cfg.d_model, cfg.d_model)),
        pool=MeanPool(),
        head=nn.Linear(cfg.d_model, cfg.n_segments),
    ))
    memory = EpisodicMemory(cfg)
    model.encoder.register_forward_hook(memory.read_hook)
    return model, memory


def batches(x, y, bs, gen=None):
    order = torch.randperm(len(x), generator=gen) if gen is not None else torch.arange(len(x))
    for i in range(0, len(x), bs):
        idx = order[i:i + bs]
        yield x[idx], y[idx]


def train_epoch(model, memory, opt, x, y, cfg, gen):
    model.train()
    total = 0.0
    for xb, yb in batches(x, y, cfg.batch_size, gen):
        logits = model(xb)
        loss = F.cross_entropy(logits, yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        memory.write_values(yb)
        total += loss.item() * len(yb)
    return total / len(x)


@torch.no_grad()
def evaluate(model, x, y, cfg):
    model.eval()
    correct = 0
    for xb, yb in batches(x, y, cfg.batch_size):
        correct += (model(xb).argmax(-1) == yb).sum().item()
    return correct / len(x)


def main():
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    cfg = Config()
    torch.manual_seed(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    x_tr, y_tr = make_baskets(cfg.n_train, cfg, gen)
    x_va, y_va = make_baskets(cfg.n_val, cfg, gen)
    model, memory = build_model(cfg)
    params = list(model.parameters()) + list(memory.parameters())
    opt = torch.optim.Adam(params, lr=cfg.lr)
    for epoch in range(cfg.epochs):
        loss = train_epoch(model, memory, opt, x_tr, y_tr, cfg, gen)
        acc = evaluate(model, x_va, y_va, cfg)
        log.info("epoch %d  loss %.4f  val acc %.3f  memory %d", epoch, loss, acc, memory.keys.size(0))


if __name__ == "__main__":
    main()
