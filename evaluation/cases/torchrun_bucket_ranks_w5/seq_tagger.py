"""Sequence tagging with length-bucketed data parallelism.

    torchrun --standalone --nproc_per_node=5 seq_tagger.py

Sentences are sorted into 12 length buckets; each rank owns a contiguous range of
buckets (so padding stays small) and takes the batch size of its shortest bucket.
Tasks and models are looked up in small registries, fairseq-style.
"""
import math
import os
import random
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

TASKS, MODELS = {}, {}


def register(table, name):
    def deco(cls):
        table[name] = cls
        return cls
    return deco


# ---------------------------------------------------------------- tasks
@register(TASKS, "synthetic_pos")
class SyntheticPOSTask:
    """Tags are a deterministic function of the token and its left neighbour."""
    n_tags = 9
    vocab = 500
    max_len = 60
    n_buckets = 12
    tokens_per_batch = 2400

    def __init__(self, n_sent=3000, seed=11):
        rng = random.Random(seed)
        self.sents = []
        for _ in range(n_sent):
            n = rng.randint(4, self.max_len)
            toks = [rng.randrange(1, self.vocab) for _ in range(n)]
            tags = [(t * 7 + (toks[i - 1] if i else 0)) % self.n_tags for i, t in enumerate(toks)]
            self.sents.append((toks, tags))
        # bucket edges on lengths: 12 buckets of equal width
        self.edges = torch.linspace(4, self.max_len + 1, self.n_buckets + 1).long()
        # batch size per bucket so that every batch holds ~tokens_per_batch tokens
        self.bucket_bsz = (self.tokens_per_batch // self.edges[1:]).clamp(min=1)

    def bucket_of(self, n):
        return int(torch.bucketize(torch.tensor(n), self.edges, right=True)) - 1

    def shard(self, rank, world):
        per_rank = math.ceil(self.n_buckets / world)
        first = rank * per_rank
        last = min(first + per_rank, self.n_buckets)
        mine = [s for s in self.sents if first <= self.bucket_of(len(s[0])) < last]
        bsz = int(self.bucket_bsz[first])
        return mine, bsz, (first, last)

    @staticmethod
    def collate(batch):
        L = max(len(t) for t, _ in batch)
        x = torch.zeros(len(batch), L, dtype=torch.long)
        y = torch.full((len(batch), L), -100, dtype=torch.long)
        for i, (t, g) in enumerate(batch):
            x[i, :len(t)] = torch.tensor(t)
            y[i, :len(g)] = torch.tensor(g)
        return x, y


# ---------------------------------------------------------------- models
@register(MODELS, "conv_tagger")
class ConvTagger(nn.Module):
    def __init__(self, task, dim=64):
        super().__init__()
        self.emb = nn.Embedding(task.vocab, dim, padding_idx=0)
        self.conv = nn.Conv1d(dim, dim, kernel_size=3, padding=1)
        self.out = nn.Linear(2 * dim, task.n_tags)

    def forward(self, x):
        e = self.emb(x)
        c = F.relu(self.conv(e.transpose(1, 2))).transpose(1, 2)
        return self.out(torch.cat([e, c], dim=-1))


# ---------------------------------------------------------------- experiment
class Experiment:
    def __init__(self, task="synthetic_pos", arch="conv_tagger", epochs=2, lr=2e-3):
        self.rank = int(os.environ.get("RANK", 0))
        self.world = int(os.environ.get("WORLD_SIZE", 1))
        self.epochs, self.lr = epochs, lr
        dist.init_process_group("gloo")
        torch.set_num_threads(1)
        torch.manual_seed(0)
        self.task = TASKS[task]()
        self.sents, self.bsz, self.buckets = self.task.shard(self.rank, self.world)
        self.model = DDP(MODELS[arch](self.task))
        self.opt = torch.optim.Adam(self.model.parameters(), lr=self.lr)
        self.info(f"buckets {self.buckets}: {len(self.sents)} sentences, batch size {self.bsz}")

    def info(self, msg):
        print(f"| rank {self.rank}/{self.world} | {msg}", flush=True)

    def batches(self, epoch):
        order = list(range(len(self.sents)))
        random.Random(epoch * 100 + self.rank).shuffle(order)
        # every rank must run the same number of steps: the fewest any rank has
        n = torch.tensor([len(order) // self.bsz])
        dist.all_reduce(n, op=dist.ReduceOp.MIN)
        for b in range(int(n)):
            idx = order[b * self.bsz:(b + 1) * self.bsz]
            yield self.task.collate([self.sents[i] for i in idx])

    def run(self):
        for epoch in range(self.epochs):
            t0, tot, ntok = time.time(), 0.0, 0
            for x, y in self.batches(epoch):
                logits = self.model(x)
                loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1), ignore_index=-100)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
                k = int((y != -100).sum())
                tot += loss.item() * k
                ntok += k
            stats = torch.tensor([tot, float(ntok)])
            dist.all_reduce(stats)
            if self.rank == 0:
                self.info(f"epoch {epoch} | loss {stats[0] / stats[1]:.4f} | {time.time() - t0:.1f}s")
        dist.destroy_process_group()


if __name__ == "__main__":
    Experiment().run()
    sys.exit(0)
