"""Purchase prediction from e-commerce browsing sessions.

    python train_sessions.py

Baseline first (logistic regression on hand-made session features, numpy), then
the Transformer session encoder from sessmodel.py.
"""
import json
import math
import time
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

from sessmodel import EVENT_TYPES, SessionEncoder, make_collate

cfg = SimpleNamespace(
    seed=11,
    n_items=3000,
    n_sessions=6000,
    max_len=48,
    batch_size=64,
    epochs=2,
    lr=5e-4,
    weight_decay=0.01,
    log_every=25,
    metrics_path="session_metrics.jsonl",
)


def simulate_sessions(n, n_items, rng):
    popularity = rng.zipf(1.3, size=n_items).astype(np.float64)
    popularity /= popularity.sum()
    sessions = []
    for sid in range(n):
        if rng.random() < 0.001:          # crawler-like power users
            length = int(rng.integers(60, 90))
        else:
            length = int(min(1 + rng.geometric(0.12), 40))
        items = (rng.choice(n_items, size=length, p=popularity) + 1).tolist()
        ev = rng.choice(len(EVENT_TYPES), size=length, p=[0.7, 0.12, 0.08, 0.1]) + 1
        carts = int((ev == 2).sum())
        dwell = float(rng.gamma(2.0, 30.0) * length)
        logit = -2.0 + 0.9 * carts + 0.02 * length - 0.3 * (ev == 4).mean()
        bought = int(rng.random() < 1 / (1 + math.exp(-logit)))
        sessions.append({"sid": sid, "items": items, "events": ev.tolist(),
                         "dwell": math.log1p(dwell) / 10.0, "bought": bought})
    return sessions


def handcrafted(s):
    ev = np.asarray(s["events"])
    return np.array([len(ev), (ev == 2).sum(), (ev == 3).sum(), (ev == 4).mean(), s["dwell"], 1.0])


def logistic_baseline(train, val, steps=300, lr=0.1):
    X = np.stack([handcrafted(s) for s in train]).astype(np.float64)
    mu, sd = X[:, :-1].mean(0), X[:, :-1].std(0) + 1e-6
    X[:, :-1] = (X[:, :-1] - mu) / sd
    y = np.array([s["bought"] for s in train], dtype=np.float64)
    w = np.zeros(X.shape[1])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-X @ w))
        w -= lr * X.T @ (p - y) / len(y)
    Xv = np.stack([handcrafted(s) for s in val]).astype(np.float64)
    Xv[:, :-1] = (Xv[:, :-1] - mu) / sd
    return auc(1 / (1 + np.exp(-Xv @ w)), np.array([s["bought"] for s in val]))


def auc(scores, labels):
    order = np.argsort(scores)
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    pos = labels == 1
    n_pos, n_neg = pos.sum(), (~pos).sum()
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


class SessionDataset(Dataset):
    def __init__(self, sessions):
        self.sessions = sessions

    def __len__(self):
        return len(self.sessions)

    def __getitem__(self, i):
        return self.sessions[i]


def evaluate(model, loader):
    model.eval()
    scores, labels, loss = [], [], 0.0
    with torch.no_grad():
        for b in loader:
            logit = model(b["items"], b["events"], b["pad_mask"], b["dwell"])
            loss += F.binary_cross_entropy_with_logits(logit, b["label"], reduction="sum").item()
            scores.append(torch.sigmoid(logit))
            labels.append(b["label"])
    s, l = torch.cat(scores).numpy(), torch.cat(labels).numpy()
    return {"val_loss": loss / len(l), "val_auc": auc(s, l)}


def main():
    rng = np.random.default_rng(cfg.seed)
    torch.manual_seed(cfg.seed)
    sessions = simulate_sessions(cfg.n_sessions, cfg.n_items, rng)
    cut = int(0.85 * len(sessions))
    train, val = sessions[:cut], sessions[cut:]
    print(f"{len(train)} train / {len(val)} val sessions, "
          f"purchase rate {np.mean([s['bought'] for s in train]):.3f}, "
          f"max length {max(len(s['items']) for s in sessions)}")
    print(f"logistic baseline val AUC {logistic_baseline(train, val):.4f}")

    collate = make_collate(cfg.max_len)
    g = torch.Generator().manual_seed(cfg.seed)
    train_loader = DataLoader(SessionDataset(train), cfg.batch_size, shuffle=True, generator=g,
                              collate_fn=collate, drop_last=True)
    val_loader = DataLoader(SessionDataset(val), 256, collate_fn=collate)

    model = SessionEncoder(cfg.n_items)
    pos_rate = np.mean([s["bought"] for s in train])
    pos_weight = torch.tensor((1 - pos_rate) / pos_rate)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    total = cfg.epochs * len(train_loader)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg.lr, total_steps=total, pct_start=0.1)
    step = 0
    with open(cfg.metrics_path, "w") as log:
        for epoch in range(cfg.epochs):
            model.train()
            t0 = time.time()
            for b in train_loader:
                logit = model(b["items"], b["events"], b["pad_mask"], b["dwell"])
                loss = F.binary_cross_entropy_with_logits(logit, b["label"], pos_weight=pos_weight)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                sched.step()
                if step % cfg.log_every == 0:
                    rec = {"step": step, "loss": round(loss.item(), 5), "lr": sched.get_last_lr()[0],
                           "width": b["items"].shape[1]}
                    log.write(json.dumps(rec) + "\n")
                    print(rec)
                step += 1
            metrics = evaluate(model, val_loader)
            metrics.update(epoch=epoch, seconds=round(time.time() - t0, 1))
            log.write(json.dumps(metrics) + "\n")
            print(metrics)


if __name__ == "__main__":
    main()
