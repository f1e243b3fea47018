"""Build a retrieval index with a small bi-encoder, encoding the corpus on every CPU
worker in parallel, then evaluate recall@k of the queries against the gathered index.

    python embed_index.py

Everything is configured by the RunConfig dataclass below (override by editing it;
this runs as a nightly job, no CLI).
"""
from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass, field, asdict

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class EncoderConfig:
    vocab_buckets: int = 2048
    dim: int = 64
    hidden: int = 128
    max_len: int = 24


@dataclass
class RunConfig:
    world_size: int = 2
    master_port: int = 29531
    n_docs: int = 301
    n_queries: int = 40
    encode_batch: int = 25
    recall_at: tuple = (1, 5, 10)
    seed: int = 13
    encoder: EncoderConfig = field(default_factory=EncoderConfig)


WORDS = ("river bank loan bridge account stream current flow deposit credit valley "
         "interest water rate mountain ledger rock branch forest teller").split()


def make_corpus(cfg: RunConfig) -> tuple[list[str], list[str], list[int]]:
    rng = np.random.default_rng(cfg.seed)
    docs = []
    for i in range(cfg.n_docs):
        n = int(rng.integers(6, cfg.encoder.max_len))
        docs.append(" ".join(rng.choice(WORDS, size=n)))
    # a query is a noisy excerpt of a document
    targets = rng.choice(cfg.n_docs, size=cfg.n_queries, replace=False).tolist()
    queries = []
    for t in targets:
        toks = docs[t].split()
        keep = [w for w in toks if rng.random() > 0.3] or toks[:1]
        queries.append(" ".join(keep))
    return docs, queries, targets


def hash_tokens(text: str, buckets: int, max_len: int) -> list[int]:
    ids = [int(hashlib.md5(w.encode()).hexdigest(), 16) % (buckets - 1) + 1 for w in text.split()]
    return (ids + [0] * max_len)[:max_len]


class BagEncoder(nn.Module):
    def __init__(self, c: EncoderConfig):
        super().__init__()
        self.emb = nn.EmbeddingBag(c.vocab_buckets, c.dim, mode="mean", padding_idx=0)
        self.mlp = nn.Sequential(nn.Linear(c.dim, c.hidden), nn.Tanh(), nn.Linear(c.hidden, c.dim))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.mlp(self.emb(ids)), dim=-1)


def shard_bounds(n: int, rank: int, world: int) -> tuple[int, int]:
    per = math.ceil(n / world)
    return rank * per, min(n, (rank + 1) * per)


@torch.no_grad()
def encode(model: nn.Module, texts: list[str], cfg: RunConfig) -> torch.Tensor:
    out = []
    for i in range(0, len(texts), cfg.encode_batch):
        ids = torch.tensor([hash_tokens(t, cfg.encoder.vocab_buckets, cfg.encoder.max_len)
                            for t in texts[i:i + cfg.encode_batch]])
        out.append(model(ids))
    return torch.cat(out)


def gather_index(local: torch.Tensor, world: int) -> torch.Tensor:
    chunks = [torch.empty_like(local) for _ in range(world)]
    dist.all_gather(chunks, local)
    return torch.cat(chunks)


def recall_at_k(scores: torch.Tensor, targets: list[int], ks) -> dict[str, float]:
    ranked = scores.argsort(dim=1, descending=True)
    tgt = torch.tensor(targets)[:, None]
    return {f"R@{k}": (ranked[:, :k] == tgt).any(1).float().mean().item() for k in ks}


def run(rank: int, cfg: RunConfig) -> None:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = str(cfg.master_port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=cfg.world_size)
    torch.manual_seed(cfg.seed)  # same weights on every worker
    model = BagEncoder(cfg.encoder).eval()
    docs, queries, targets = make_corpus(cfg)

    lo, hi = shard_bounds(len(docs), rank, cfg.world_size)
    local = encode(model, docs[lo:hi], cfg)
    print(f"[worker {rank}] encoded docs {lo}:{hi} -> {tuple(local.shape)}", flush=True)
    index = gather_index(local, cfg.world_size)

    if rank == 0:
        q = encode(model, queries, cfg)
        metrics = recall_at_k(q @ index.T, targets, cfg.recall_at)
        print("index:", tuple(index.shape), "metrics:", metrics, flush=True)
        torch.save({"index": index, "config": asdict(cfg)}, "doc_index.pt")
    dist.barrier()
    dist.destroy_process_group()


def main() -> None:
    cfg = RunConfig()
    print("config:", asdict(cfg))
    mp.start_processes(run, args=(cfg,), nprocs=cfg.world_size, join=True, start_method="spawn")


if __name__ == "__main__":
    main()
