#!/usr/bin/env python
# WGAN-GP on the 8-gaussians toy problem (Gulrajani et al. 2017, fig. 2).
# Critic is compiled; generator is small enough that it does not matter.
import argparse
import math
import os
import time

import numpy as np
import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--iters", type=int, default=300)
parser.add_argument("--batch", type=int, default=256)
parser.add_argument("--critic-iters", type=int, default=5)
parser.add_argument("--lam", type=float, default=0.1)
parser.add_argument("--dim", type=int, default=128)
parser.add_argument("--backend", default="aot_eager")  # inductor's C++ build is slow on the laptop
parser.add_argument("--out", default="samples")
args = parser.parse_args()

torch.manual_seed(1)
rng = np.random.default_rng(1)
torch.set_num_threads(1)


def data_8gaussians(n):
    centers = [(math.cos(a), math.sin(a)) for a in np.linspace(0, 2 * np.pi, 8, endpoint=False)]
    idx = rng.integers(0, 8, n)
    pts = np.array(centers)[idx] * 2.0 + rng.normal(scale=0.02, size=(n, 2))
    return torch.from_numpy(pts / 1.414).float()


def mlp(din, dout):
    return nn.Sequential(nn.Linear(din, args.dim), nn.ReLU(), nn.Linear(args.dim, args.dim), nn.ReLU(),
                         nn.Linear(args.dim, args.dim), nn.ReLU(), nn.Linear(args.dim, dout))


G = mlp(2, 2)
D = mlp(2, 1)
D_c = torch.compile(D, backend=args.backend)
optG = torch.optim.Adam(G.parameters(), lr=1e-4, betas=(0.5, 0.9))
optD = torch.optim.Adam(D.parameters(), lr=1e-4, betas=(0.5, 0.9))


def gradient_penalty(critic, real, fake):
    alpha = torch.rand(real.size(0), 1)
    interp = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    out = critic(interp)
    grads = torch.autograd.grad(out.sum(), interp, create_graph=True)[0]
    return ((grads.norm(2, dim=1) - 1) ** 2).mean()


def mode_coverage(samples):
    centers = torch.tensor([(math.cos(a), math.sin(a)) for a in np.linspace(0, 2 * np.pi, 8, endpoint=False)]) * 2 / 1.414
    d = torch.cdist(samples, centers.float())
    hit = d.min(1).values < 0.1
    return len(set(d.argmin(1)[hit].tolist())), hit.float().mean().item()


t0 = time.time()
for it in range(args.iters):
    for p in D.parameters():
        p.requires_grad_(True)
    for _ in range(args.critic_iters):
        real = data_8gaussians(args.batch)
        with torch.no_grad():
            fake = G(torch.randn(args.batch, 2))
        d_real, d_fake = D_c(real).mean(), D_c(fake).mean()
        gp = gradient_penalty(D_c, real, fake)
        lossD = d_fake - d_real + args.lam * gp
        optD.zero_grad()
        lossD.backward()
        optD.step()
        w_dist = (d_real - d_fake).item()
    for p in D.parameters():
        p.requires_grad_(False)
    lossG = -D_c(G(torch.randn(args.batch, 2))).mean()
    optG.zero_grad()
    lossG.backward()
    optG.step()
    if it % 50 == 0:
        modes, frac = mode_coverage(G(torch.randn(2000, 2)).detach())
        print(f"iter {it:4d}  W {w_dist:+.4f}  gp {gp.item():.4f}  G {lossG.item():+.4f}  "
              f"modes {modes}/8 ({frac:.2f})  {time.time() - t0:.1f}s")

os.makedirs(args.out, exist_ok=True)
np.save(os.path.join(args.out, "final.npy"), G(torch.randn(2000, 2)).detach().numpy())
