"""DP-SGD fine-tuning of a small CNN with per-sample gradients from torch.func.

Phase 1 pretrains on "public" data with ordinary SGD. Phase 2 fine-tunes on "private"
data with per-sample gradient clipping + Gaussian noise (Abadi et al. 2016), computing
per-sample gradients with vmap(grad(...)) over functional_call.
"""
from __future__ import annotations

import argparse
import logging
import math
import time
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

logging.basicConfig(level=logging.INFO, format="%(asctime)s [%(levelname)s] %(message)s")
LOG = logging.getLogger("dp")


@dataclass(frozen=True)
class DPConfig:
    seed: int = 3
    image: int = 16
    n_classes: int = 5
    n_public: int = 2048
    n_private: int = 1024
    pre_epochs: int = 2
    dp_epochs: int = 2
    batch: int = 64
    lr_pre: float = 0.05
    lr_dp: float = 0.02
    clip: float = 1.0
    noise_multiplier: float = 1.1
    ckpt: str = "dp_cnn.pt"


def synthetic_images(n, size, n_classes, gen):
    """Class k = a bright blob at one of n_classes positions on a noisy background."""
    y = torch.randint(0, n_classes, (n,), generator=gen)
    x = 0.3 * torch.randn(n, 1, size, size, generator=gen)
    centers = torch.linspace(2, size - 3, n_classes).round().long()
    for i in range(n):
        c = centers[y[i]]
        x[i, 0, c - 2:c + 2, c - 2:c + 2] += 1.5
    return x, y


class SmallCNN(nn.Module):
    def __init__(self, n_classes, image):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * (image // 4) ** 2, n_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def minibatches(x, y, batch, gen):
    perm = torch.randperm(len(x), generator=gen)
    for i in range(0, len(x), batch):
        idx = perm[i:i + batch]
        yield x[idx], y[idx]


def accuracy(model, x, y):
    model.eval()
    with torch.no_grad():
        acc = (model(x).argmax(-1) == y).float().mean().item()
    model.train()
    return acc


def pretrain(model, data, cfg: DPConfig, gen):
    opt = torch.optim.SGD(model.parameters(), lr=cfg.lr_pre, momentum=0.9)
    for ep in range(cfg.pre_epochs):
        tot = 0.0
        for xb, yb in minibatches(*data, cfg.batch, gen):
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            tot += loss.item() * len(xb)
        LOG.info("pretrain epoch %d loss %.4f acc %.3f", ep, tot / len(data[0]), accuracy(model, *data))


# --- functional per-sample machinery -------------------------------------------------

def sample_loss(params, buffers, model, x, y):
    logits = functional_call(model, (params, buffers), (x,))
    return F.cross_entropy(logits, y)


def per_sample_grads(model, params, buffers, xb, yb):
    g = grad(partial(sample_loss, model=model))
    return vmap(lambda p, b, x, y: g(p, b, x=x, y=y), in_dims=(None, None, 0, 0))(params, buffers, xb, yb)


def clip_and_noise(grads, cfg: DPConfig, gen):
    names = list(grads)
    flat = torch.cat([grads[n].flatten(1) for n in names], dim=1)      # (B, P)
    norms = flat.norm(dim=1)
    factor = (cfg.clip / (norms + 1e-6)).clamp(max=1.0)
    out = {}
    B = flat.shape[0]
    for n in names:
        g = (grads[n] * factor.view(-1, *([1] * (grads[n].dim() - 1)))).sum(0)
        noise = torch.randn(g.shape, generator=gen) * cfg.noise_multiplier * cfg.clip
        out[n] = (g + noise) / B
    return out, norms


def dp_finetune(model, data, cfg: DPConfig, gen):
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}
    steps = 0
    for ep in range(cfg.dp_epochs):
        for xb, yb in minibatches(*data, cfg.batch, gen):
            grads = per_sample_grads(model, params, buffers, xb, yb)
            noisy, norms = clip_and_noise(grads, cfg, gen)
            params = {k: params[k] - cfg.lr_dp * noisy[k] for k in params}
            steps += 1
            if steps % 10 == 0:
                LOG.info("dp step %d median grad norm %.3f", steps, norms.median().item())
        model.load_state_dict({**params, **buffers})
        LOG.info("dp epoch %d acc %.3f", ep, accuracy(model, *data))
    q = cfg.batch / len(data[0])
    eps_rough = q * math.sqrt(steps * math.log(1e5)) / cfg.noise_multiplier
    return steps, eps_rough


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-pretrain", action="store_true")
    ap.add_argument("--dp-epochs", type=int, default=None)
    args = ap.parse_args()
    cfg = DPConfig() if args.dp_epochs is None else DPConfig(dp_epochs=args.dp_epochs)
    gen = torch.Generator().manual_seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    public = synthetic_images(cfg.n_public, cfg.image, cfg.n_classes, gen)
    private = synthetic_images(cfg.n_private, cfg.image, cfg.n_classes, gen)
    model = SmallCNN(cfg.n_classes, cfg.image)
    t0 = time.time()
    if not args.skip_pretrain:
        pretrain(model, public, cfg, gen)
    LOG.info("private acc before DP fine-tuning: %.3f", accuracy(model, *private))
    steps, eps = dp_finetune(model, private, cfg, gen)
    LOG.info("DP fine-tuning: %d steps, rough eps %.2f, acc %.3f (%.1fs)", steps, eps,
             accuracy(model, *private), time.time() - t0)
    torch.save(model.state_dict(), cfg.ckpt)


if __name__ == "__main__":
    main()
