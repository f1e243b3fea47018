"""Residual MLP regressor with an optional refinement block, trained on synthetic data.

    python train_refiner.py [--epochs 4] [--no-compile] [--lr 3e-3]
"""
from __future__ import annotations

import argparse
import json
import logging
import time
from dataclasses import asdict, dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("refiner")


@dataclass
class ModelConfig:
    d_in: int = 16
    d_hidden: int = 64
    n_blocks: int = 3
    dropout: float = 0.1
    refine_threshold: float = 0.0  # only refine when the trunk activations are "active"


@dataclass
class TrainConfig:
    seed: int = 0
    n_train: int = 2048
    n_val: int = 512
    batch_size: int = 128
    epochs: int = 4
    lr: float = 3e-3
    weight_decay: float = 1e-4
    compile: bool = True
    fullgraph: bool = True  # we want to know about graph breaks, not silently lose speed
    model: ModelConfig = field(default_factory=ModelConfig)


class ResidualBlock(nn.Module):
    def __init__(self, d: int, p: float):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 2 * d)
        self.fc2 = nn.Linear(2 * d, d)
        self.drop = nn.Dropout(p)

    def forward(self, x):
        return x + self.drop(self.fc2(F.gelu(self.fc1(self.norm(x)))))


class Refiner(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.inp = nn.Linear(cfg.d_in, cfg.d_hidden)
        self.blocks = nn.ModuleList(ResidualBlock(cfg.d_hidden, cfg.dropout) for _ in range(cfg.n_blocks))
        self.refine = nn.Sequential(nn.Linear(cfg.d_hidden, cfg.d_hidden), nn.Tanh())
        self.head = nn.Linear(cfg.d_hidden, 1)

    def forward(self, x):
        h = self.inp(x)
        for blk in self.blocks:
            h = blk(h)
        if h.mean() > self.cfg.refine_threshold:
            h = h + self.refine(h)
        return self.head(h).squeeze(-1)


def make_data(n: int, d: int, g: torch.Generator):
    x = torch.randn(n, d, generator=g)
    w = torch.linspace(-1.0, 1.0, d)
    y = torch.sin(x @ w) + 0.1 * (x[:, 0] * x[:, 1]) + 0.05 * torch.randn(n, generator=g)
    return x, y


class Meter:
    def __init__(self):
        self.total, self.count = 0.0, 0

    def update(self, v: float, n: int):
        self.total += v * n
        self.count += n

    @property
    def avg(self) -> float:
        return self.total / max(self.count, 1)


@torch.no_grad()
def evaluate(model, x, y, bs):
    model.eval()
    m = Meter()
    for i in range(0, len(x), bs):
        pred = model(x[i:i + bs])
        m.update(F.mse_loss(pred, y[i:i + bs]).item(), len(pred))
    model.train()
    return m.avg


def train(cfg: TrainConfig) -> dict:
    torch.manual_seed(cfg.seed)
    g = torch.Generator().manual_seed(cfg.seed)
    x_tr, y_tr = make_data(cfg.n_train, cfg.model.d_in, g)
    x_va, y_va = make_data(cfg.n_val, cfg.model.d_in, g)
    model = Refiner(cfg.model)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    step_model = torch.compile(model, fullgraph=cfg.fullgraph) if cfg.compile else model
    history = []
    for epoch in range(cfg.epochs):
        t0, meter = time.perf_counter(), Meter()
        perm = torch.randperm(cfg.n_train, generator=g)
        for i in range(0, cfg.n_train, cfg.batch_size):
            idx = perm[i:i + cfg.batch_size]
            loss = F.mse_loss(step_model(x_tr[idx]), y_tr[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            meter.update(loss.item(), len(idx))
        val = evaluate(step_model, x_va, y_va, cfg.batch_size)
        history.append({"epoch": epoch, "train_mse": meter.avg, "val_mse": val, "s": time.perf_counter() - t0})
        log.info(json.dumps(history[-1]))
    return {"config": asdict(cfg), "history": history}


def parse_args() -> TrainConfig:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=TrainConfig.epochs)
    p.add_argument("--lr", type=float, default=TrainConfig.lr)
    p.add_argument("--no-compile", action="store_true")
    a = p.parse_args()
    return TrainConfig(epochs=a.epochs, lr=a.lr, compile=not a.no_compile)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    torch.set_num_threads(1)
    result = train(parse_args())
    log.info("final val mse %.4f", result["history"][-1]["val_mse"])
