"""Toy DDPM on a 2-D "two moons" point cloud.

Usage: python ddpm_toy.py   (all settings live in ExperimentConfig below)
"""
from __future__ import annotations

import json
import logging
import math
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, List

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("ddpm")


@dataclass
class ScheduleConfig:
    num_timesteps: int = 1000
    beta_start: float = 1e-4
    beta_end: float = 0.02
    kind: str = "linear"


@dataclass
class ModelConfig:
    hidden: int = 128
    time_dim: int = 32
    depth: int = 3


@dataclass
class ExperimentConfig:
    seed: int = 1234
    n_points: int = 4096
    batch_size: int = 64
    epochs: int = 6
    lr: float = 2e-3
    log_every: int = 20
    ckpt_path: str = "ddpm_toy.pt"
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    model: ModelConfig = field(default_factory=ModelConfig)


def make_moons(n: int, noise: float = 0.05, seed: int = 0) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    half = n // 2
    theta = rng.uniform(0, math.pi, size=half)
    upper = np.stack([np.cos(theta), np.sin(theta)], axis=1)
    lower = np.stack([1 - np.cos(theta), 0.5 - np.sin(theta)], axis=1)
    pts = np.concatenate([upper, lower], axis=0)
    pts += rng.normal(scale=noise, size=pts.shape)
    pts = (pts - pts.mean(0)) / pts.std(0)
    return torch.tensor(pts, dtype=torch.float32)


def make_betas(cfg: ScheduleConfig) -> torch.Tensor:
    if cfg.kind == "linear":
        return torch.linspace(cfg.beta_start, cfg.beta_end, cfg.num_timesteps)
    if cfg.kind == "cosine":
        steps = torch.arange(cfg.num_timesteps + 1, dtype=torch.float64) / cfg.num_timesteps
        f = torch.cos((steps + 0.008) / 1.008 * math.pi / 2) ** 2
        return torch.clamp(1 - f[1:] / f[:-1], max=0.999).float()
    raise ValueError(f"unknown schedule {cfg.kind}")


def extract(a: torch.Tensor, t: torch.Tensor, x_shape) -> torch.Tensor:
    """Pick a[t] for each batch element and reshape to broadcast over x."""
    out = a.gather(-1, t)
    return out.reshape(t.shape[0], *((1,) * (len(x_shape) - 1)))


class SinusoidalEmbedding(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        half = self.dim // 2
        freqs = torch.exp(-math.log(10000) * torch.arange(half, device=t.device) / half)
        args = t.float()[:, None] * freqs[None]
        return torch.cat([args.sin(), args.cos()], dim=-1)


class Denoiser(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.temb = nn.Sequential(SinusoidalEmbedding(cfg.time_dim), nn.Linear(cfg.time_dim, cfg.hidden), nn.SiLU())
        self.inp = nn.Linear(2, cfg.hidden)
        self.blocks = nn.ModuleList([nn.Sequential(nn.LayerNorm(cfg.hidden), nn.Linear(cfg.hidden, cfg.hidden), nn.SiLU())
                                     for _ in range(cfg.depth)])
        self.out = nn.Linear(cfg.hidden, 2)

    def forward(self, x, t):
        h = self.inp(x) + self.temb(t)
        for blk in self.blocks:
            h = h + blk(h)
        return self.out(h)


class GaussianDiffusion:
    def __init__(self, cfg: ScheduleConfig):
        self.T = cfg.num_timesteps
        betas = make_betas(cfg)
        alphas = 1.0 - betas
        acp = torch.cumprod(alphas, dim=0)
        self.betas = betas
        self.sqrt_acp = acp.sqrt()
        self.sqrt_one_minus_acp = (1 - acp).sqrt()

    def sample_timesteps(self, n: int) -> torch.Tensor:
        # timesteps are 1..T in the paper
        return torch.randint(1, self.T + 1, (n,))

    def q_sample(self, x0, t, noise):
        return extract(self.sqrt_acp, t, x0.shape) * x0 + extract(self.sqrt_one_minus_acp, t, x0.shape) * noise

    def loss(self, model, x0):
        t = self.sample_timesteps(x0.shape[0])
        noise = torch.randn_like(x0)
        xt = self.q_sample(x0, t, noise)
        return F.mse_loss(model(xt, t), noise)


class Callback:
    def on_step_end(self, exp: "Experiment", step: int, loss: float): ...
    def on_epoch_end(self, exp: "Experiment", epoch: int): ...


class LossLogger(Callback):
    def __init__(self, every: int):
        self.every, self.window = every, []

    def on_step_end(self, exp, step, loss):
        self.window.append(loss)
        if step % self.every == 0:
            log.info("step %d  loss %.4f", step, sum(self.window) / len(self.window))
            self.window.clear()


class Checkpointer(Callback):
    def __init__(self, path: str):
        self.path, self.best = path, float("inf")

    def on_epoch_end(self, exp, epoch):
        if exp.epoch_loss < self.best:
            self.best = exp.epoch_loss
            torch.save({"model": exp.model.state_dict(), "epoch": epoch, "cfg": asdict(exp.cfg)}, self.path)
            log.info("saved checkpoint (epoch %d, loss %.4f)", epoch, self.best)


class Experiment:
    def __init__(self, cfg: ExperimentConfig, callbacks: List[Callback]):
        self.cfg = cfg
        self.callbacks = callbacks
        torch.manual_seed(cfg.seed)
        self.data = make_moons(cfg.n_points, seed=cfg.seed)
        self.model = Denoiser(cfg.model)
        self.diffusion = GaussianDiffusion(cfg.schedule)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=cfg.lr)
        self.global_step = 0
        self.epoch_loss = float("inf")

    def _emit(self, hook: str, *args):
        for cb in self.callbacks:
            getattr(cb, hook)(self, *args)

    def batches(self):
        perm = torch.randperm(len(self.data))
        for i in range(0, len(perm), self.cfg.batch_size):
            yield self.data[perm[i:i + self.cfg.batch_size]]

    def train(self):
        for epoch in range(self.cfg.epochs):
            total, n = 0.0, 0
            for x0 in self.batches():
                loss = self.diffusion.loss(self.model, x0)
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.opt.step()
                self.global_step += 1
                total += loss.item() * len(x0)
                n += len(x0)
                self._emit("on_step_end", self.global_step, loss.item())
            self.epoch_loss = total / n
            self._emit("on_epoch_end", epoch)

    @torch.no_grad()
    def sample(self, n: int) -> torch.Tensor:
        d = self.diffusion
        x = torch.randn(n, 2)
        for i in reversed(range(d.T)):
            t = torch.full((n,), i, dtype=torch.long)
            eps = self.model(x, t)
            beta = extract(d.betas, t, x.shape)
            x = (x - beta / extract(d.sqrt_one_minus_acp, t, x.shape) * eps) / (1 - beta).sqrt()
            if i > 0:
                x = x + beta.sqrt() * torch.randn_like(x)
        return x


def main():
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    cfg = ExperimentConfig()
    log.info("config: %s", json.dumps(asdict(cfg)))
    exp = Experiment(cfg, [LossLogger(cfg.log_every), Checkpointer(cfg.ckpt_path)])
    t0 = time.time()
    exp.train()
    log.info("training took %.1fs", time.time() - t0)
    samples = exp.sample(512)
    log.info("sample mean %s std %s", samples.mean(0).tolist(), samples.std(0).tolist())


if __name__ == "__main__":
    main()
