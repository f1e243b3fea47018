"""Deep-kernel GP surrogate for a (synthetic) alloy property simulator.

An MLP maps 14 composition/processing descriptors to a 4-d feature space; an exact GP
with an RBF kernel on those features is trained on random mini-batches by maximising the
marginal likelihood (the usual "stochastic DKL" recipe).  Validation uses a fixed context
set of training points for the posterior mean / variance.

Configuration lives in the YAML block below; `--set key=value` overrides a single entry.
"""
import argparse
import csv
import logging
import math
import os
import time
from dataclasses import dataclass, field, fields

import numpy as np
import torch
import torch.nn as nn
import yaml

DEFAULT_YAML = """
experiment: dkl_alloy_v3
seed: 2024
data:
  n_train: 12000
  n_val: 1500
  n_features: 14
  noise_std: 0.0      # the simulator is deterministic
model:
  hidden: [128, 128]
  feature_dim: 4
  init_lengthscale: 1.0
  init_noise: 0.1
  jitter: 1.0e-6
optim:
  batch_size: 320
  peak_lr: 0.01
  warmup_steps: 3000
  weight_decay: 0.0
  total_steps: 12000
  log_every: 250
  val_every: 1000
  context_size: 512
output_dir: runs/dkl
"""


@dataclass
class DataCfg:
    n_train: int
    n_val: int
    n_features: int
    noise_std: float


@dataclass
class ModelCfg:
    hidden: list
    feature_dim: int
    init_lengthscale: float
    init_noise: float
    jitter: float


@dataclass
class OptimCfg:
    batch_size: int
    peak_lr: float
    warmup_steps: int
    weight_decay: float
    total_steps: int
    log_every: int
    val_every: int
    context_size: int


@dataclass
class Config:
    experiment: str
    seed: int
    data: DataCfg
    model: ModelCfg
    optim: OptimCfg
    output_dir: str
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_yaml(cls, text, overrides=()):
        raw = yaml.safe_load(text)
        for ov in overrides:
            key, val = ov.split("=", 1)
            node = raw
            *path, last = key.split(".")
            for p in path:
                node = node[p]
            node[last] = yaml.safe_load(val)
        sub = {"data": DataCfg, "model": ModelCfg, "optim": OptimCfg}
        kw = {f.name: (sub[f.name](**raw[f.name]) if f.name in sub else raw.get(f.name))
              for f in fields(cls) if f.name in raw}
        return cls(**kw)


def setup_logging(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    fmt = logging.Formatter("%(asctime)s [%(levelname)s] %(name)s: %(message)s")
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    for h in (logging.StreamHandler(), logging.FileHandler(os.path.join(out_dir, "train.log"))):
        h.setFormatter(fmt)
        root.addHandler(h)
    return logging.getLogger("dkl")


def make_data(cfg: DataCfg, seed):
    rng = np.random.default_rng(seed)
    n = cfg.n_train + cfg.n_val
    X = rng.uniform(-1, 1, size=(n, cfg.n_features))
    X[:, :5] = rng.dirichlet(np.ones(5), size=n) * 2 - 1        # composition fractions
    w = rng.normal(size=(cfg.n_features,))
    y = (np.sin(3 * X[:, 0] * X[:, 1]) + 0.5 * np.tanh(X @ w) + 0.3 * X[:, 2] ** 2
         - 0.2 * np.cos(4 * X[:, 5]) * X[:, 6] + cfg.noise_std * rng.normal(size=n))
    X, y = torch.tensor(X, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)
    y_mean, y_std = y[:cfg.n_train].mean(), y[:cfg.n_train].std()
    y = (y - y_mean) / y_std
    return (X[:cfg.n_train], y[:cfg.n_train]), (X[cfg.n_train:], y[cfg.n_train:])


class DeepKernelGP(nn.Module):
    def __init__(self, n_in, cfg: ModelCfg):
        super().__init__()
        layers, d = [], n_in
        for h in cfg.hidden:
            layers += [nn.Linear(d, h), nn.ReLU()]
            d = h
        layers.append(nn.Linear(d, cfg.feature_dim))
        self.features = nn.Sequential(*layers)
        self.log_ls = nn.Parameter(torch.tensor(math.log(cfg.init_lengthscale)))
        self.log_os = nn.Parameter(torch.tensor(0.0))
        self.log_noise = nn.Parameter(torch.tensor(math.log(cfg.init_noise)))
        self.jitter = cfg.jitter

    def kernel(self, za, zb):
        d2 = torch.cdist(za / self.log_ls.exp(), zb / self.log_ls.exp()).pow(2)
        return self.log_os.exp() * torch.exp(-0.5 * d2)

    def train_cov(self, z):
        n = z.size(0)
        return self.kernel(z, z) + (self.log_noise.exp() + self.jitter) * torch.eye(n)

    def mll(self, x, y):
        z = self.features(x)
        L = torch.linalg.cholesky(self.train_cov(z))
        alpha = torch.cholesky_solve(y[:, None], L)
        n = y.numel()
        nll = 0.5 * (y[:, None] * alpha).sum() + L.diagonal().log().sum() + 0.5 * n * math.log(2 * math.pi)
        return nll / n

    @torch.no_grad()
    def predict(self, xc, yc, xs):
        zc, zs = self.features(xc), self.features(xs)
        L = torch.linalg.cholesky(self.train_cov(zc))
        Ks = self.kernel(zs, zc)
        mean = Ks @ torch.cholesky_solve(yc[:, None], L)
        v = torch.linalg.solve_triangular(L, Ks.T, upper=False)
        var = self.log_os.exp() - (v ** 2).sum(0) + self.log_noise.exp()
        return mean.squeeze(1), var.clamp_min(1e-6)


def lr_lambda(step, cfg: OptimCfg):
    return min(1.0, (step + 1) / cfg.warmup_steps)   # linear warmup, then constant


def validate(model, ctx, val):
    model.eval()
    mean, var = model.predict(ctx[0], ctx[1], val[0])
    rmse = (mean - val[1]).pow(2).mean().sqrt().item()
    nlpd = (0.5 * torch.log(2 * math.pi * var) + 0.5 * (val[1] - mean) ** 2 / var).mean().item()
    model.train()
    return rmse, nlpd


def save_checkpoint(path, model, opt, step, metrics):
    tmp = path + ".tmp"
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                "metrics": metrics}, tmp)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", action="append", default=[], help="dotted.key=value override")
    args = ap.parse_args()
    cfg = Config.from_yaml(DEFAULT_YAML, args.set)
    log = setup_logging(cfg.output_dir)
    torch.set_num_threads(1)
    torch.manual_seed(cfg.seed)
    log.info("config: %s", cfg)

    (Xtr, ytr), (Xva, yva) = make_data(cfg.data, cfg.seed)
    g = torch.Generator().manual_seed(cfg.seed)
    ctx_idx = torch.randperm(len(Xtr), generator=g)[:cfg.optim.context_size]
    ctx = (Xtr[ctx_idx], ytr[ctx_idx])
    model = DeepKernelGP(cfg.data.n_features, cfg.model)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.optim.peak_lr,
                           weight_decay=cfg.optim.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_lambda(s, cfg.optim))

    metrics_f = open(os.path.join(cfg.output_dir, "metrics.csv"), "w", newline="")
    writer = csv.writer(metrics_f)
    writer.writerow(["step", "lr", "train_nll", "lengthscale", "noise", "val_rmse", "val_nlpd"])
    best, t0, running = float("inf"), time.time(), 0.0
    for step in range(cfg.optim.total_steps):
        idx = torch.randint(len(Xtr), (cfg.optim.batch_size,), generator=g)
        loss = model.mll(Xtr[idx], ytr[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        running += loss.item()
        if (step + 1) % cfg.optim.log_every == 0:
            log.info("step %d lr %.4f nll %.4f ls %.3g os %.3g noise %.3g (%.0fs)", step + 1,
                     sched.get_last_lr()[0], running / cfg.optim.log_every,
                     model.log_ls.exp().item(), model.log_os.exp().item(),
                     model.log_noise.exp().item(), time.time() - t0)
            running = 0.0
        if (step + 1) % cfg.optim.val_every == 0:
            rmse, nlpd = validate(model, ctx, (Xva, yva))
            writer.writerow([step + 1, sched.get_last_lr()[0], loss.item(),
                             model.log_ls.exp().item(), model.log_noise.exp().item(), rmse, nlpd])
            metrics_f.flush()
            log.info("validation step %d: rmse %.4f nlpd %.4f", step + 1, rmse, nlpd)
            save_checkpoint(os.path.join(cfg.output_dir, "last.pt"), model, opt, step + 1,
                            {"rmse": rmse, "nlpd": nlpd})
            if nlpd < best:
                best = nlpd
                save_checkpoint(os.path.join(cfg.output_dir, "best.pt"), model, opt, step + 1,
                                {"rmse": rmse, "nlpd": nlpd})
    metrics_f.close()
    log.info("done: best val nlpd %.4f", best)


if __name__ == "__main__":
    main()
