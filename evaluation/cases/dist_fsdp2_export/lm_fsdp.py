"""Tiny next-token model trained with FSDP2 (fully_shard) on CPU/gloo, in a small
lightning-style harness: a LitModule with *_step hooks and a Trainer that owns the loop.

    torchrun --nproc_per_node=2 --standalone lm_fsdp.py --max-epochs 3
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def markov_corpus(n_seq, seq_len, vocab, seed):
    g = torch.Generator().manual_seed(seed)
    trans = torch.softmax(torch.randn(vocab, vocab, generator=g) * 3, dim=1)
    seqs = torch.empty(n_seq, seq_len + 1, dtype=torch.long)
    seqs[:, 0] = torch.randint(0, vocab, (n_seq,), generator=g)
    for t in range(seq_len):
        seqs[:, t + 1] = torch.multinomial(trans[seqs[:, t]], 1, generator=g).squeeze(1)
    return seqs[:, :-1], seqs[:, 1:]


class TinyLM(nn.Module):
    def __init__(self, vocab, dim, layers, heads, seq_len):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(seq_len, dim))
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout=0.0, batch_first=True, norm_first=True)
            for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(seq_len), persistent=False)

    def forward(self, tokens):
        h = self.embed(tokens) + self.pos[: tokens.shape[1]]
        for blk in self.blocks:
            h = blk(h, src_mask=self.causal[: tokens.shape[1], : tokens.shape[1]], is_causal=True)
        return self.head(self.norm(h))


class LitLM:
    """User code: what to compute. The Trainer decides how it runs."""

    def __init__(self, hp):
        self.hp = hp
        self.model = TinyLM(hp.vocab, hp.dim, hp.layers, hp.heads, hp.seq_len)

    def configure_sharding(self, mesh):
        for blk in self.model.blocks:
            fully_shard(blk, mesh=mesh)
        fully_shard(self.model, mesh=mesh)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.model.parameters(), lr=self.hp.lr, betas=(0.9, 0.95))

    def training_step(self, batch):
        x, y = batch
        logits = self.model(x)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

    @torch.no_grad()
    def validation_step(self, batch):
        return self.training_step(batch)

    def on_new_best(self, trainer, val_loss):
        # keep a plain (unsharded) copy for the serving team, written by rank 0
        if trainer.global_rank == 0:
            serving = TinyLM(self.hp.vocab, self.hp.dim, self.hp.layers, self.hp.heads, self.hp.seq_len)
            serving.load_state_dict(self.model.state_dict())
            torch.save(serving.state_dict(), os.path.join(self.hp.out_dir, "serving_best.pt"))
            trainer.log(f"exported serving model (val {val_loss:.4f})")


class Trainer:
    def __init__(self, max_epochs, log_every=10):
        self.max_epochs = max_epochs
        self.log_every = log_every
        dist.init_process_group("gloo")
        self.global_rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        self.mesh = init_device_mesh("cpu", (self.world_size,))

    def log(self, msg):
        if self.global_rank == 0:
            print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)

    def _loader(self, ds, shuffle, bs):
        sampler = DistributedSampler(ds, shuffle=shuffle, seed=0)
        return DataLoader(ds, batch_size=bs, sampler=sampler), sampler

    def _mean(self, value):
        t = torch.tensor(value, dtype=torch.float64)
        dist.all_reduce(t)
        return (t / self.world_size).item()

    def fit(self, lit, train_ds, val_ds, batch_size):
        lit.configure_sharding(self.mesh)
        opt = lit.configure_optimizers()
        train_dl, sampler = self._loader(train_ds, True, batch_size)
        val_dl, _ = self._loader(val_ds, False, batch_size)
        best, step = float("inf"), 0
        for epoch in range(self.max_epochs):
            sampler.set_epoch(epoch)
            lit.model.train()
            for batch in train_dl:
                loss = lit.training_step(batch)
                opt.zero_grad()
                loss.backward()
                opt.step()
                if step % self.log_every == 0:
                    self.log(f"epoch {epoch} step {step} loss {loss.item():.4f}")
                step += 1
            lit.model.eval()
            val = self._mean(sum(lit.validation_step(b).item() for b in val_dl) / len(val_dl))
            self.log(f"epoch {epoch} val_loss {val:.4f}")
            if val < best:
                best = val
                lit.on_new_best(self, val)
        dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--vocab", type=int, default=64)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=32)
    p.add_argument("--n-seq", type=int, default=512)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--max-epochs", type=int, default=3)
    p.add_argument("--out-dir", default="artifacts")
    hp = p.parse_args()
    torch.manual_seed(0)
    os.makedirs(hp.out_dir, exist_ok=True)
    x, y = markov_corpus(hp.n_seq, hp.seq_len, hp.vocab, seed=42)
    n_val = hp.n_seq // 8
    train_ds, val_ds = TensorDataset(x[n_val:], y[n_val:]), TensorDataset(x[:n_val], y[:n_val])
    Trainer(hp.max_epochs).fit(LitLM(hp), train_ds, val_ds, hp.batch_size)


if __name__ == "__main__":
    main()
