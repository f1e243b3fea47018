# shrinkgpu: partial result (stopped: time limit reached): not verified in fresh interpreters; `shrinkgpu reduce ... --resume` continues.
"""Non-saturating GAN on the 8-Gaussians ring, with compiled training steps.

The discriminator loss and the generator update are compiled with fullgraph=True so
that a graph break shows up as an error instead of silently slowing training down.
"""
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class RingData:
    def __init__(self, modes=8, radius=2.0, std=0.05, seed=0):
        self.centers = torch.tensor([[radius * math.cos(2 * math.pi * k / modes),
                                      radius * math.sin(2 * math.pi * k / modes)] for k in range(modes)])
        self.std = std
        self.gen = torch.Generator().manual_seed(seed)

    def sample(self, n):
        k = torch.randint(0, len(self.centers), (n,), generator=self.gen)
        return self.centers[k] + self.std * torch.randn(n, 2, generator=self.gen)


def mlp(d_in, d_out, width=64, depth=3, act=nn.LeakyReLU):
    layers, d = [], d_in
    for _ in range(depth):
        layers += [nn.Linear(d, width), act(0.2) if act is nn.LeakyReLU else act()]
        d = width
    layers.append(nn.Linear(d, d_out))
    return nn.Sequential(*layers)


class GANTrainer:
    def __init__(self, z_dim=8, batch=256, n_critic=3, lr_g=2e-4, lr_d=2e-4, seed=0):
        torch.manual_seed(seed)
        self.z_dim, self.batch, self.n_critic = z_dim, batch, n_critic
        self.G = mlp(z_dim, 2, act=nn.ReLU)
        self.D = mlp(2, 1)
        self.opt_g = torch.optim.Adam(self.G.parameters(), lr=lr_g, betas=(0.5, 0.999))
        self.opt_d = torch.optim.Adam(self.D.parameters(), lr=lr_d, betas=(0.5, 0.999))
        self.data = RingData(seed=seed)
        self.noise = torch.Generator().manual_seed(seed + 1)
        self.d_loss = torch.compile(self._d_loss, fullgraph=True)
        self.g_step = torch.compile(self._g_step, fullgraph=True)
        self.history = []

    def z(self, n):
        return torch.randn(n, self.z_dim, generator=self.noise)

    def _d_loss(self, real, z):
        fake = self.G(z).detach()
        return F.softplus(-self.D(real)).mean() + F.softplus(self.D(fake)).mean()

    def _g_step(self, z):
        fake = self.G(z)
        loss = F.softplus(-self.D(fake)).mean()
        loss.backward()
        return loss.detach()

    def train_iteration(self):
        for _ in range(self.n_critic):
            self.opt_d.zero_grad(set_to_none=True)
            d_loss = self.d_loss(self.data.sample(self.batch), self.z(self.batch))
            d_loss.backward()
            self.opt_d.step()
        self.opt_g.zero_grad(set_to_none=True)
        for p in self.D.parameters():
            p.requires_grad_(False)
        g_loss = self.g_step(self.z(self.batch))
        for p in self.D.parameters():
            p.requires_grad_(True)
        self.opt_g.step()
        return d_loss.item(), g_loss.item()

    @torch.no_grad()
    def mode_coverage(self, n=2000):
        samples = self.G(self.z(n))
        dist = torch.cdist(samples, self.data.centers)
        nearest = dist.argmin(dim=1)
        close = dist.min(dim=1).values < 4 * self.data.std
        return len(set(nearest[close].tolist())), close.float().mean().item()

    def fit(self, iterations=200, log_every=25):
        t0 = time.time()
        for it in range(iterations):
            d_loss, g_loss = self.train_iteration()
            self.history.append((d_loss, g_loss))
            if it % log_every == 0:
                modes, quality = self.mode_coverage()
                print(f"[{time.time() - t0:6.1f}s] it {it:4d}  D {d_loss:.3f}  G {g_loss:.3f}"
                      f"  modes {modes}/8  high-quality {quality:.1%}", flush=True)


if __name__ == "__main__":
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    GANTrainer().fit(iters)
