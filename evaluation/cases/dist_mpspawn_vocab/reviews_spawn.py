#!/usr/bin/env python
"""Review-rating classifier; starts its own worker processes (no torchrun needed).

    python reviews_spawn.py --workers 2 --epochs 3
"""
import argparse
import collections
import os
import random
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

POSITIVE = "great love excellent perfect happy recommend fast sturdy beautiful works".split()
NEGATIVE = "broken awful refund slow cheap poor returned useless late disappointed".split()
NEUTRAL = ("the it was and this i to a of for is with my on but product item box "
           "arrived order color size price delivery seller quality battery screen").split()


def write_corpus(path, n, seed):
    rng = random.Random(seed)
    with open(path, "w") as f:
        for _ in range(n):
            stars = rng.randint(1, 5)
            words = [rng.choice(NEUTRAL) for _ in range(rng.randint(6, 16))]
            pool = POSITIVE if stars >= 4 else NEGATIVE if stars <= 2 else NEUTRAL
            words += [rng.choice(pool) for _ in range(rng.randint(1, 4))]
            if rng.random() < 0.3:
                words.append(f"sku{rng.randint(0, 400)}")  # product codes, mostly rare
            rng.shuffle(words)
            f.write(f"{stars}\t{' '.join(words)}\n")


def read_shard(path, rank, world):
    with open(path) as f:
        lines = f.read().splitlines()
    rows = [line.split("\t") for line in lines[rank::world]]
    return [int(s) - 1 for s, _ in rows], [t.split() for _, t in rows]


def build_vocab(texts, min_freq):
    counts = collections.Counter(w for t in texts for w in t)
    itos = ["<pad>", "<unk>"] + sorted(w for w, c in counts.items() if c >= min_freq)
    return {w: i for i, w in enumerate(itos)}


def encode(texts, vocab, max_len):
    out = torch.zeros(len(texts), max_len, dtype=torch.long)
    for i, t in enumerate(texts):
        ids = [vocab.get(w, 1) for w in t][:max_len]
        out[i, : len(ids)] = torch.tensor(ids)
    return out


class RatingModel(nn.Module):
    def __init__(self, vocab_size, dim, n_classes=5):
        super().__init__()
        self.emb = nn.Embedding(vocab_size, dim, padding_idx=0)
        self.attn = nn.Linear(dim, 1)
        self.cls = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, n_classes))

    def forward(self, ids):
        h = self.emb(ids)
        scores = self.attn(h).squeeze(-1).masked_fill(ids == 0, -1e4)
        pooled = (torch.softmax(scores, 1).unsqueeze(-1) * h).sum(1)
        return self.cls(pooled)


def main_worker(rank, args):
    dist.init_process_group("gloo", rank=rank, world_size=args.workers)
    torch.manual_seed(args.seed)
    labels, texts = read_shard(args.corpus, rank, args.workers)
    vocab = build_vocab(texts, args.min_freq)
    x = encode(texts, vocab, args.max_len)
    y = torch.tensor(labels)
    print(f"[worker {rank}] {len(texts)} reviews, vocab {len(vocab)}", flush=True)

    model = nn.parallel.DistributedDataParallel(RatingModel(len(vocab), args.dim))
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    for epoch in range(args.epochs):
        t0, total, correct = time.time(), 0.0, 0
        perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(args.seed + epoch))
        for i in range(0, len(perm), args.batch_size):
            idx = perm[i:i + args.batch_size]
            logits = model(x[idx])
            loss = F.cross_entropy(logits, y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
            correct += (logits.argmax(1) == y[idx]).sum().item()
        stats = torch.tensor([total, correct, len(y)], dtype=torch.float64)
        dist.all_reduce(stats)
        if rank == 0:
            print(f"epoch {epoch}: loss {stats[0] / stats[2]:.4f} acc {stats[1] / stats[2]:.3f} "
                  f"({time.time() - t0:.1f}s)", flush=True)
            torch.save({"model": model.module.state_dict(), "vocab": vocab}, args.checkpoint)
    dist.destroy_process_group()


def parse_args():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--corpus", default="reviews.tsv")
    p.add_argument("--n-reviews", type=int, default=1500)
    p.add_argument("--min-freq", type=int, default=2)
    p.add_argument("--max-len", type=int, default=24)
    p.add_argument("--dim", type=int, default=32)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=5e-3)
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--checkpoint", default="rating_model.pt")
    return p.parse_args()


if __name__ == "__main__":
    args = parse_args()
    if not os.path.exists(args.corpus):
        write_corpus(args.corpus, args.n_reviews, args.seed)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "12355")
    mp.spawn(main_worker, args=(args,), nprocs=args.workers, join=True)
