"""LightGCN on an implicit-feedback click log, with a nightly graph refresh.

    python recsys.py [--config overrides.toml] [--set train.epochs=5]

Config is TOML (tomllib, stdlib); defaults below.
"""
import argparse
import logging
import math
import time
import tomllib

import numpy as np
import pandas as pd
import torch
import torch.nn as nn

DEFAULTS = """
seed = 3

[data]
n_users = 1200
n_items = 900
n_days = 40
split_day = 34
clicks_per_user = 30
n_topics = 12

[model]
name = "lightgcn"
dim = 48
layers = 3

[train]
epochs = 6
batch_size = 2048
lr = 0.01
reg = 1e-4

[eval]
k = 20
"""

log = logging.getLogger("recsys")
MODELS = {}


def register(name):
    def deco(cls):
        MODELS[name] = cls
        return cls
    return deco


def load_config(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--config")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    args = ap.parse_args(argv)
    cfg = tomllib.loads(DEFAULTS)
    if args.config:
        with open(args.config, "rb") as f:
            for sec, vals in tomllib.load(f).items():
                cfg[sec].update(vals) if isinstance(vals, dict) else cfg.__setitem__(sec, vals)
    for kv in args.set:
        key, val = kv.split("=", 1)
        sec, name = key.split(".")
        cfg[sec][name] = tomllib.loads(f"v = {val}")["v"]
    return cfg


# ------------------------------------------------------------------------------- data
def simulate_clicks(c, rng):
    topics_u = rng.dirichlet(np.full(c["n_topics"], 0.3), size=c["n_users"])
    item_topic = rng.integers(0, c["n_topics"], size=c["n_items"])
    release = np.where(rng.random(c["n_items"]) < 0.08,
                       rng.integers(c["split_day"], c["n_days"], size=c["n_items"]), 0)
    rows = []
    for u in range(c["n_users"]):
        days = np.sort(rng.integers(0, c["n_days"], size=c["clicks_per_user"]))
        for d in days:
            avail = np.flatnonzero(release <= d)
            t = rng.choice(c["n_topics"], p=topics_u[u])
            cand = avail[item_topic[avail] == t]
            if len(cand) == 0:
                cand = avail
            rows.append((f"u{u:05d}", f"sku-{rng.choice(cand):05d}", int(d)))
    df = pd.DataFrame(rows, columns=["user", "item", "day"]).drop_duplicates(["user", "item"])
    return df.reset_index(drop=True)


class IdMap:
    def __init__(self, keys):
        self.index = {k: i for i, k in enumerate(sorted(set(keys)))}

    def __len__(self):
        return len(self.index)

    def extend(self, keys):
        for k in sorted(set(keys)):
            if k not in self.index:
                self.index[k] = len(self.index)

    def __call__(self, keys):
        return np.array([self.index[k] for k in keys], dtype=np.int64)


def build_norm_adj(users, items, n_users, n_items):
    """Symmetric normalised bipartite adjacency D^-1/2 A D^-1/2, (U+I) x (U+I)."""
    n = n_users + n_items
    r = np.concatenate([users, items + n_users])
    c = np.concatenate([items + n_users, users])
    deg = np.bincount(r, minlength=n).astype(np.float32)
    dinv = np.where(deg > 0, deg ** -0.5, 0.0)
    vals = dinv[r] * dinv[c]
    idx = torch.from_numpy(np.stack([r, c]))
    return torch.sparse_coo_tensor(idx, torch.from_numpy(vals.astype(np.float32)), (n, n)).coalesce()


# ------------------------------------------------------------------------------- models
@register("mf")
class MF(nn.Module):
    def __init__(self, n_users, n_items, dim, **_):
        super().__init__()
        self.user = nn.Embedding(n_users, dim)
        self.item = nn.Embedding(n_items, dim)
        nn.init.normal_(self.user.weight, std=0.1)
        nn.init.normal_(self.item.weight, std=0.1)

    def embeddings(self, adj=None):
        return self.user.weight, self.item.weight


@register("lightgcn")
class LightGCN(MF):
    def __init__(self, n_users, n_items, dim, layers=3, **_):
        super().__init__(n_users, n_items, dim)
        self.layers = layers
        self.n_users = n_users

    def embeddings(self, adj):
        x = torch.cat([self.user.weight, self.item.weight])
        out = [x]
        for _ in range(self.layers):
            x = torch.sparse.mm(adj, x)
            out.append(x)
        x = torch.stack(out).mean(0)
        return x[: self.n_users], x[self.n_users:]


def bpr_batches(users, items, n_items, batch_size, rng):
    perm = rng.permutation(len(users))
    for s in range(0, len(perm), batch_size):
        j = perm[s:s + batch_size]
        neg = rng.integers(0, n_items, size=len(j))
        yield (torch.from_numpy(users[j]), torch.from_numpy(items[j]), torch.from_numpy(neg))


@torch.no_grad()
def recall_at_k(U, I, train_pos, test_pos, k):
    scores = U @ I.T
    for u, items in train_pos.items():
        scores[u, items] = -math.inf
    top = scores.topk(k, dim=1).indices.numpy()
    rec = [len(set(top[u]) & set(items)) / min(k, len(items)) for u, items in test_pos.items()]
    return float(np.mean(rec))


def group_items(users, items):
    out = {}
    for u, i in zip(users, items):
        out.setdefault(int(u), []).append(int(i))
    return out


def main():
    logging.basicConfig(level=logging.INFO, format="%(relativeCreated)7.0fms %(message)s")
    cfg = load_config()
    rng = np.random.default_rng(cfg["seed"])
    torch.manual_seed(cfg["seed"])
    t0 = time.time()
    df = simulate_clicks(cfg["data"], rng)
    train = df[df.day < cfg["data"]["split_day"]]
    test = df[df.day >= cfg["data"]["split_day"]]
    umap, imap = IdMap(df.user), IdMap(train.item)
    test = test[test.item.isin(imap.index)]
    log.info("%d clicks (%d train, %d test), %d users, %d train items, %.1fs",
             len(df), len(train), len(test), len(umap), len(imap), time.time() - t0)

    tu, ti = umap(train.user), imap(train.item)
    adj = build_norm_adj(tu, ti, len(umap), len(imap))
    train_pos, test_pos = group_items(tu, ti), group_items(umap(test.user), imap(test.item))

    pop = torch.from_numpy(np.bincount(ti, minlength=len(imap)).astype(np.float32))
    log.info("popularity recall@%d %.4f", cfg["eval"]["k"],
             recall_at_k(torch.ones(len(umap), 1), pop[:, None], train_pos, test_pos, cfg["eval"]["k"]))

    model = MODELS[cfg["model"]["name"]](len(umap), len(imap), **{k: v for k, v in cfg["model"].items() if k != "name"})
    opt = torch.optim.Adam(model.parameters(), lr=cfg["train"]["lr"])
    for epoch in range(cfg["train"]["epochs"]):
        tot, n = 0.0, 0
        for u, i, j in bpr_batches(tu, ti, len(imap), cfg["train"]["batch_size"], rng):
            U, I = model.embeddings(adj)
            pos = (U[u] * I[i]).sum(1)
            neg = (U[u] * I[j]).sum(1)
            reg = (model.user(u).pow(2).sum() + model.item(i).pow(2).sum() + model.item(j).pow(2).sum()) / len(u)
            loss = -torch.nn.functional.logsigmoid(pos - neg).mean() + cfg["train"]["reg"] * reg
            opt.zero_grad()
            loss.backward()
            opt.step()
            tot += loss.item() * len(u)
            n += len(u)
        with torch.no_grad():
            U, I = model.embeddings(adj)
        log.info("epoch %d bpr %.4f recall@%d %.4f", epoch, tot / n, cfg["eval"]["k"],
                 recall_at_k(U, I, train_pos, test_pos, cfg["eval"]["k"]))

    # nightly refresh: fold the latest clicks into the graph (no retraining) and
    # export serving embeddings; new SKUs get appended ids
    full = df
    imap.extend(full.item)
    adj_full = build_norm_adj(umap(full.user), imap(full.item), len(umap), len(imap))
    log.info("refreshed graph: %d items, %d edges", len(imap), adj_full._nnz() // 2)
    with torch.no_grad():
        U, I = model.embeddings(adj_full)
    torch.save({"users": U, "items": I, "item_ids": imap.index}, "serving_embeddings.pt")
    log.info("exported %s user / %s item embeddings", tuple(U.shape), tuple(I.shape))


if __name__ == "__main__":
    main()
