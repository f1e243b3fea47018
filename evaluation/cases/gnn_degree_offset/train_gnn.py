#!/usr/bin/env python
"""Graph classification on synthetic molecules-like graphs, pure torch message passing.

Layers and readouts are plugins registered by name so the config can pick them:

    python train_gnn.py --conv gin --readout sum --layers 3
"""
import argparse
import logging
import random
import sys
from collections import defaultdict

import torch
import torch.nn as nn
import torch.nn.functional as F

logger = logging.getLogger(__name__)

CONV_REGISTRY = {}
READOUT_REGISTRY = {}


def register(registry, name):
    def deco(cls):
        if name in registry:
            raise KeyError(f"duplicate plugin {name}")
        registry[name] = cls
        return cls
    return deco


# --------------------------------------------------------------------------- data

def random_graph(rng, min_nodes, max_nodes, feat_dim):
    n = rng.randint(min_nodes, max_nodes)
    edges = []
    for i in range(1, n):                       # random spanning tree ...
        j = rng.randrange(i)
        edges += [(i, j), (j, i)]
    for _ in range(rng.randint(0, n)):          # ... plus a few chords
        a, b = rng.randrange(n), rng.randrange(n)
        if a != b:
            edges += [(a, b), (b, a)]
    x = torch.randn(n, feat_dim, generator=None)
    edge_index = torch.tensor(edges, dtype=torch.long).t().contiguous()
    label = int(len(edges) / (2 * n) > 1.25)     # "dense" vs "sparse"
    return {"x": x, "edge_index": edge_index, "y": label, "num_nodes": n}


def make_dataset(n_graphs, seed, feat_dim=16, min_nodes=6, max_nodes=30):
    rng = random.Random(seed)
    torch.manual_seed(seed)
    return [random_graph(rng, min_nodes, max_nodes, feat_dim) for _ in range(n_graphs)]


def collate_graphs(graphs):
    """Concatenate graphs into one big disconnected graph with a `batch` vector."""
    xs, eis, ys, batch = [], [], [], []
    offset = 0
    for gi, g in enumerate(graphs):
        xs.append(g["x"])
        offset += g["num_nodes"]
        eis.append(g["edge_index"] + offset)
        ys.append(g["y"])
        batch.append(torch.full((g["num_nodes"],), gi, dtype=torch.long))
    return {
        "x": torch.cat(xs),
        "edge_index": torch.cat(eis, dim=1),
        "y": torch.tensor(ys),
        "batch": torch.cat(batch),
        "num_graphs": len(graphs),
    }


def iterate(dataset, batch_size, shuffle, seed):
    idx = list(range(len(dataset)))
    if shuffle:
        random.Random(seed).shuffle(idx)
    for s in range(0, len(idx), batch_size):
        yield collate_graphs([dataset[i] for i in idx[s:s + batch_size]])


# --------------------------------------------------------------------------- plugins

@register(CONV_REGISTRY, "gcn")
class GCNConv(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.lin = nn.Linear(dim, dim)

    def forward(self, x, edge_index):
        src, dst = edge_index
        deg = torch.zeros(x.size(0)).index_add_(0, dst, torch.ones(dst.numel())) + 1
        norm = (deg[src] * deg[dst]).rsqrt().unsqueeze(-1)
        msg = self.lin(x)[src] * norm
        out = torch.zeros_like(x).index_add_(0, dst, msg)
        return F.relu(out + self.lin(x) / deg.unsqueeze(-1))


@register(CONV_REGISTRY, "gin")
class GINConv(nn.Module):
    def __init__(self, dim, eps=0.0):
        super().__init__()
        self.eps = nn.Parameter(torch.tensor(eps))
        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))

    def forward(self, x, edge_index):
        src, dst = edge_index
        agg = torch.zeros_like(x)
        agg.scatter_add_(0, dst.unsqueeze(-1).expand(-1, x.size(1)), x[src])
        return F.relu(self.mlp((1 + self.eps) * x + agg))


@register(READOUT_REGISTRY, "sum")
def sum_readout(h, batch, num_graphs):
    return torch.zeros(num_graphs, h.size(1)).index_add_(0, batch, h)


@register(READOUT_REGISTRY, "mean")
def mean_readout(h, batch, num_graphs):
    s = sum_readout(h, batch, num_graphs)
    cnt = torch.bincount(batch, minlength=num_graphs).clamp(min=1).unsqueeze(-1)
    return s / cnt


class GraphClassifier(nn.Module):
    def __init__(self, in_dim, hidden, n_layers, conv, readout, n_classes=2, dropout=0.1):
        super().__init__()
        self.embed = nn.Linear(in_dim, hidden)
        self.convs = nn.ModuleList([CONV_REGISTRY[conv](hidden) for _ in range(n_layers)])
        self.readout = READOUT_REGISTRY[readout]
        self.head = nn.Sequential(nn.Dropout(dropout), nn.Linear(hidden, n_classes))

    def forward(self, batch):
        h = self.embed(batch["x"])
        for conv in self.convs:
            h = conv(h, batch["edge_index"])
        g = self.readout(h, batch["batch"], batch["num_graphs"])
        return self.head(g)


# --------------------------------------------------------------------------- train / eval

def run_epoch(model, data, opt, args, epoch, train=True):
    model.train(train)
    stats = defaultdict(float)
    with torch.set_grad_enabled(train):
        for batch in iterate(data, args.batch_size, shuffle=train, seed=args.seed + epoch):
            logits = model(batch)
            loss = F.cross_entropy(logits, batch["y"])
            if train:
                opt.zero_grad()
                loss.backward()
                opt.step()
            stats["loss"] += loss.item() * batch["num_graphs"]
            stats["correct"] += (logits.argmax(-1) == batch["y"]).sum().item()
            stats["n"] += batch["num_graphs"]
    return {"loss": stats["loss"] / stats["n"], "acc": stats["correct"] / stats["n"]}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--conv", default="gcn", choices=sorted(CONV_REGISTRY))
    p.add_argument("--readout", default="sum", choices=sorted(READOUT_REGISTRY))
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--n-graphs", type=int, default=600)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", default="gnn_best.pt")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="[%(levelname)s] %(message)s")
    torch.manual_seed(args.seed)
    data = make_dataset(args.n_graphs, args.seed)
    n_val = len(data) // 5
    train, val = data[n_val:], data[:n_val]
    logger.info("%d train / %d val graphs, positives: %d", len(train), len(val), sum(g["y"] for g in data))
    model = GraphClassifier(16, args.hidden, args.layers, args.conv, args.readout)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    best = 0.0
    for epoch in range(args.epochs):
        tr = run_epoch(model, train, opt, args, epoch, train=True)
        va = run_epoch(model, val, opt, args, epoch, train=False)
        logger.info("epoch %02d train loss %.4f acc %.3f | val loss %.4f acc %.3f",
                    epoch, tr["loss"], tr["acc"], va["loss"], va["acc"])
        if va["acc"] > best:
            best = va["acc"]
            torch.save(model.state_dict(), args.out)
    logger.info("best val acc %.3f", best)


if __name__ == "__main__":
    main()
