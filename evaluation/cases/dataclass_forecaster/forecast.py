"""Short-horizon load forecasting with a small 1-D CNN.

Everything is driven by ``ExperimentConfig``; override fields on the command line
with ``key=value`` pairs, e.g. ``python forecast.py train.epochs=5 model.channels=32``.
"""
from __future__ import annotations

import functools
import json
import logging
import math
import sys
import time
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Callable, Iterable, Protocol

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------- utils
def timed(label: str | None = None) -> Callable:
    """Log wall time of the wrapped call."""

    def deco(fn: Callable) -> Callable:
        name = label or fn.__qualname__

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                logger.debug("%s took %.3fs", name, time.perf_counter() - t0)

        return wrapper

    return deco


def log_call(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        logger.info("-> %s", fn.__name__)
        return fn(*args, **kwargs)

    return wrapper


# --------------------------------------------------------------------------- config
@dataclass
class DataConfig:
    n_series: int = 48
    length: int = 600
    window: int = 96
    horizon: int = 12
    batch_size: int = 32
    seed: int = 7


@dataclass
class ModelConfig:
    channels: int = 16
    kernel_size: int = 5
    n_blocks: int = 2
    pool: bool = True
    hidden: int = 64


@dataclass
class TrainConfig:
    epochs: int = 3
    lr: float = 2e-3
    grad_clip: float = 1.0
    out_dir: str = "runs/forecast"


@dataclass
class ExperimentConfig:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    @classmethod
    def from_cli(cls, argv: Iterable[str]) -> "ExperimentConfig":
        cfg = cls()
        for item in argv:
            key, _, raw = item.partition("=")
            section, _, name = key.partition(".")
            sub = getattr(cfg, section)
            ftype = {f.name: f.type for f in fields(sub)}[name]
            value = {"int": int, "float": float, "bool": lambda s: s.lower() in ("1", "true", "yes"),
                     "str": str}[ftype](raw)
            setattr(sub, name, value)
        return cfg

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)


# --------------------------------------------------------------------------- data
class SyntheticLoad:
    """Daily + weekly seasonality with noise, one series per feeder."""

    def __init__(self, cfg: DataConfig):
        self.cfg = cfg
        rng = np.random.default_rng(cfg.seed)
        t = np.arange(cfg.length, dtype=np.float32)
        base = rng.uniform(0.5, 2.0, size=(cfg.n_series, 1)).astype(np.float32)
        daily = np.sin(2 * np.pi * t / 24.0)[None, :]
        weekly = 0.4 * np.sin(2 * np.pi * t / 168.0)[None, :]
        noise = rng.normal(0, 0.1, size=(cfg.n_series, cfg.length)).astype(np.float32)
        self.values = (base + daily + weekly + noise).astype(np.float32)

    @staticmethod
    def windows(series: np.ndarray, window: int, horizon: int, step: int = 6):
        xs, ys = [], []
        for start in range(0, series.shape[-1] - window - horizon + 1, step):
            xs.append(series[start:start + window])
            ys.append(series[start + window:start + window + horizon])
        return np.stack(xs), np.stack(ys)

    @timed("build loaders")
    def loaders(self) -> tuple[DataLoader, DataLoader]:
        cfg = self.cfg
        split = int(cfg.length * 0.8)
        tr = [self.windows(s[:split], cfg.window, cfg.horizon) for s in self.values]
        va = [self.windows(s[split - cfg.window:], cfg.window, cfg.horizon) for s in self.values]
        xtr, ytr = map(np.concatenate, zip(*tr))
        xva, yva = map(np.concatenate, zip(*va))
        mu, sd = xtr.mean(), xtr.std()
        norm = lambda a: torch.from_numpy((a - mu) / sd)
        g = torch.Generator().manual_seed(cfg.seed)
        train = DataLoader(TensorDataset(norm(xtr)[:, None, :], norm(ytr)), batch_size=cfg.batch_size,
                           shuffle=True, generator=g)
        val = DataLoader(TensorDataset(norm(xva)[:, None, :], norm(yva)), batch_size=256)
        return train, val


# --------------------------------------------------------------------------- model
class ConvBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, k: int, pool: bool):
        super().__init__()
        self.conv = nn.Conv1d(c_in, c_out, k, padding=k // 2)
        self.norm = nn.BatchNorm1d(c_out)
        self.act = nn.SiLU()
        self.pool = nn.MaxPool1d(3, stride=2) if pool else nn.Identity()

    def forward(self, x):
        return self.pool(self.act(self.norm(self.conv(x))))


class CNNForecaster(nn.Module):
    def __init__(self, mcfg: ModelConfig, dcfg: DataConfig):
        super().__init__()
        self.mcfg, self.dcfg = mcfg, dcfg
        blocks, c = [], 1
        for _ in range(mcfg.n_blocks):
            blocks.append(ConvBlock(c, mcfg.channels, mcfg.kernel_size, mcfg.pool))
            c = mcfg.channels
        self.features = nn.Sequential(*blocks)
        self.head = nn.Sequential(
            nn.Flatten(),
            nn.Linear(self.flat_dim, mcfg.hidden),
            nn.SiLU(),
            nn.Linear(mcfg.hidden, dcfg.horizon),
        )

    @property
    def flat_dim(self) -> int:
        # every pooling stage halves the sequence
        length = self.dcfg.window
        if self.mcfg.pool:
            length = length // (2 ** self.mcfg.n_blocks)
        return self.mcfg.channels * length

    def forward(self, x):
        return self.head(self.features(x))


# --------------------------------------------------------------------------- training
class Callback(Protocol):
    def on_epoch_end(self, trainer: "Trainer", epoch: int, metrics: dict) -> None: ...


class PrintMetrics:
    def on_epoch_end(self, trainer, epoch, metrics):
        print(f"[epoch {epoch:02d}] " + " ".join(f"{k}={v:.4f}" for k, v in metrics.items()))


class SaveBest:
    def __init__(self, path: Path, key: str = "val_mae"):
        self.path, self.key, self.best = path, key, math.inf

    def on_epoch_end(self, trainer, epoch, metrics):
        if metrics[self.key] < self.best:
            self.best = metrics[self.key]
            torch.save({"model": trainer.model.state_dict(), "epoch": epoch}, self.path)


class Trainer:
    def __init__(self, model: nn.Module, cfg: TrainConfig, callbacks: list[Callback] | None = None):
        self.model, self.cfg = model, cfg
        self.callbacks = callbacks or []
        self.opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
        self.loss_fn = nn.SmoothL1Loss()

    @property
    def n_params(self) -> int:
        return sum(p.numel() for p in self.model.parameters() if p.requires_grad)

    @timed()
    def train_epoch(self, loader: DataLoader) -> float:
        self.model.train()
        total, n = 0.0, 0
        for x, y in loader:
            pred = self.model(x)
            loss = self.loss_fn(pred, y)
            self.opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
            self.opt.step()
            total += loss.item() * len(x)
            n += len(x)
        return total / n

    @torch.no_grad()
    @timed()
    def evaluate(self, loader: DataLoader) -> float:
        self.model.eval()
        err = [torch.abs(self.model(x) - y).mean(dim=1) for x, y in loader]
        return torch.cat(err).mean().item()

    @log_call
    def fit(self, train: DataLoader, val: DataLoader) -> dict:
        metrics = {}
        for epoch in range(self.cfg.epochs):
            metrics = {"train_loss": self.train_epoch(train), "val_mae": self.evaluate(val)}
            for cb in self.callbacks:
                cb.on_epoch_end(self, epoch, metrics)
        return metrics


def main(argv: list[str]) -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    cfg = ExperimentConfig.from_cli(argv)
    torch.manual_seed(cfg.data.seed)
    out = Path(cfg.train.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(cfg.to_json())

    train_dl, val_dl = SyntheticLoad(cfg.data).loaders()
    model = CNNForecaster(cfg.model, cfg.data)
    trainer = Trainer(model, cfg.train, callbacks=[PrintMetrics(), SaveBest(out / "best.pt")])
    logger.info("model has %d trainable parameters", trainer.n_params)
    final = trainer.fit(train_dl, val_dl)
    logger.info("final metrics: %s", final)


if __name__ == "__main__":
    main(sys.argv[1:])
