#!/usr/bin/env python
# shrinkgpu: partial result (stopped: time limit reached): not verified in fresh interpreters; `shrinkgpu reduce ... --resume` continues.
# Multi-task model for property listings: predict the log sale price (regression) and
# whether the listing sells within 30 days (classification) from one shared trunk.
#
# Task weights are balanced GradNorm-style: every few steps we measure how large each
# task's gradient is on the last shared layer and nudge the weights towards equal
# gradient magnitudes.  The trunk is compiled on its own (the heads are tiny).
import csv
import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIG = {
    "n_listings": 2048,
    "n_features": 24,
    "hidden": 64,
    "batch_size": 128,
    "steps": 12,
    "lr": 1e-3,
    "balance_every": 4,      # measure per-task gradient norms every N steps
    "balance_lr": 0.05,
    "seed": 1234,
    "log_csv": "outputs/multitask_log.csv",
}


def synth_listings(n, d, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    w_price = torch.randn(d, generator=g) / math.sqrt(d)
    w_fast = torch.randn(d, generator=g) / math.sqrt(d)
    log_price = 12.0 + x @ w_price + 0.1 * torch.randn(n, generator=g)
    sells_fast = ((x @ w_fast + 0.3 * torch.randn(n, generator=g)) > 0.2).float()
    return x, log_price, sells_fast


class Trunk(nn.Module):
    def __init__(self, d_in, hidden):
        super().__init__()
        self.block1 = nn.Sequential(nn.Linear(d_in, hidden), nn.LayerNorm(hidden), nn.SiLU())
        self.block2 = nn.Sequential(nn.Linear(hidden, hidden), nn.LayerNorm(hidden), nn.SiLU())
        self.shared_out = nn.Linear(hidden, hidden)

    def forward(self, x):
        h = self.block1(x)
        h = h + self.block2(h)
        return torch.tanh(self.shared_out(h))


class ListingModel(nn.Module):
    def __init__(self, d_in, hidden):
        super().__init__()
        self.trunk = Trunk(d_in, hidden)
        self.price_head = nn.Linear(hidden, 1)
        self.fast_head = nn.Linear(hidden, 1)

    def forward(self, x):
        z = self.trunk(x)
        return self.price_head(z).squeeze(-1), self.fast_head(z).squeeze(-1)


def task_losses(model, xb, price, fast):
    p_hat, f_logit = model(xb)
    return {
        "price": F.smooth_l1_loss(p_hat, price),
        "fast": F.binary_cross_entropy_with_logits(f_logit, fast),
    }


def shared_grad_norms(losses, shared_weight):
    """Norm of each task's gradient on the last shared layer (graph kept for the update)."""
    norms = {}
    for name, loss in losses.items():
        (g,) = torch.autograd.grad(loss, shared_weight, retain_graph=True)
        norms[name] = g.norm().item()
    return norms


def main(cfg):
    torch.manual_seed(cfg["seed"])
    x, log_price, sells_fast = synth_listings(cfg["n_listings"], cfg["n_features"], cfg["seed"])
    price_mean, price_std = log_price.mean(), log_price.std()
    y_price = (log_price - price_mean) / price_std

    model = ListingModel(cfg["n_features"], cfg["hidden"])
    model.trunk = torch.compile(model.trunk)
    opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"])
    weights = {"price": 1.0, "fast": 1.0}

    os.makedirs(os.path.dirname(cfg["log_csv"]), exist_ok=True)
    log_file = open(cfg["log_csv"], "w", newline="")
    writer = csv.writer(log_file)
    writer.writerow(["step", "price_loss", "fast_loss", "w_price", "w_fast", "seconds"])

    gen = torch.Generator().manual_seed(cfg["seed"] + 1)
    t0 = time.time()
    for step in range(cfg["steps"]):
        idx = torch.randint(0, len(x), (cfg["batch_size"],), generator=gen)
        losses = task_losses(model, x[idx], y_price[idx], sells_fast[idx])

        if (step + 1) % cfg["balance_every"] == 0:
            norms = shared_grad_norms(losses, model.trunk.shared_out.weight)
            mean_norm = sum(norms.values()) / len(norms)
            for name in weights:
                weights[name] *= math.exp(cfg["balance_lr"] * (mean_norm - norms[name]) / (mean_norm + 1e-8))
            total_w = sum(weights.values())
            weights = {k: len(weights) * v / total_w for k, v in weights.items()}

        loss = sum(weights[k] * losses[k] for k in losses)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        writer.writerow([step, f"{losses['price'].item():.4f}", f"{losses['fast'].item():.4f}",
                         f"{weights['price']:.3f}", f"{weights['fast']:.3f}", f"{time.time() - t0:.1f}"])
        print(f"step {step:3d}  price {losses['price'].item():.4f}  fast {losses['fast'].item():.4f}"
              f"  weights {weights['price']:.2f}/{weights['fast']:.2f}")
    log_file.close()


if __name__ == "__main__":
    main(CONFIG)
