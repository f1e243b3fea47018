# RBF network for terrain height interpolation from scattered survey points.
#
# The Gaussian layer is a custom autograd.Function so we never materialise the
# (N, K, D) difference tensor for the whole batch in the forward pass; the gradient
# is recomputed in backward.  Centres are initialised with k-means (scipy).
import argparse
import logging
import math
import os
import time

import numpy as np
import torch
import torch.nn as nn
from scipy.cluster.vq import kmeans2

LOG = logging.getLogger("rbf")


def terrain(xy):
    x, y = xy[:, 0], xy[:, 1]
    return (np.sin(3 * x) * np.cos(2 * y) + 0.5 * np.exp(-((x - 0.3) ** 2 + (y + 0.2) ** 2) / 0.05)
            + 0.1 * x * y)


def make_survey(n, noise, seed):
    rng = np.random.default_rng(seed)
    xy = rng.uniform(-1, 1, size=(n, 2))
    z = terrain(xy) + rng.normal(0, noise, size=n)
    return xy.astype(np.float32), z.astype(np.float32)


class GaussianRBF(torch.autograd.Function):
    """phi[n, k] = exp(-||x_n - c_k||^2 / (2 s_k^2))"""

    @staticmethod
    def forward(ctx, x, centers, log_width):
        c = centers.to(x.dtype)
        d2 = torch.cdist(x, c).pow(2)
        s2 = torch.exp(2 * log_width)
        phi = torch.exp(-d2 / (2 * s2))
        ctx.save_for_backward(x, centers, log_width, phi)
        return phi

    @staticmethod
    def backward(ctx, grad_phi):
        x, centers, log_width, phi = ctx.saved_tensors
        s2 = torch.exp(2 * log_width)
        gp = grad_phi * phi                                   # (N, K)
        diff = x.unsqueeze(1) - centers.unsqueeze(0)          # (N, K, D)
        # d phi / d x = -phi * (x - c) / s^2
        grad_x = -torch.bmm((gp / s2).unsqueeze(1), diff).squeeze(1)
        grad_c = None
        if ctx.needs_input_grad[1]:
            grad_c = torch.einsum("nk,nkd->kd", gp / s2, diff)
        grad_lw = None
        if ctx.needs_input_grad[2]:
            d2 = diff.pow(2).sum(-1)
            grad_lw = (gp * d2 / s2).sum(0)
        return grad_x, grad_c, grad_lw


class RBFLayer(nn.Module):
    def __init__(self, centers: np.ndarray, init_width: float, train_centers: bool = False):
        super().__init__()
        c = torch.from_numpy(centers)
        if train_centers:
            self.centers = nn.Parameter(c)
        else:
            self.register_buffer("centers", c)
        self.log_width = nn.Parameter(torch.full((c.shape[0],), math.log(init_width)))

    def forward(self, x):
        return GaussianRBF.apply(x, self.centers, self.log_width)


class RBFNet(nn.Module):
    def __init__(self, centers, init_width, hidden=32):
        super().__init__()
        self.input_scale = nn.Parameter(torch.ones(2))
        self.rbf = RBFLayer(centers, init_width)
        self.readout = nn.Sequential(nn.Linear(centers.shape[0], hidden), nn.SiLU(), nn.Linear(hidden, 1))

    def forward(self, xy):
        return self.readout(self.rbf(xy * self.input_scale)).squeeze(-1)


def rmse(model, x, z):
    with torch.no_grad():
        return torch.sqrt(torch.mean((model(x) - z) ** 2)).item()


def main():
    ap = argparse.ArgumentParser(description="RBF terrain interpolation")
    ap.add_argument("--points", type=int, default=3000)
    ap.add_argument("--noise", type=float, default=0.02)
    ap.add_argument("--centers", type=int, default=64)
    ap.add_argument("--width", type=float, default=0.25)
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--lr", type=float, default=5e-3)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--outdir", default="runs/rbf")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()

    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="[%(levelname)s] %(message)s")
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)

    xy, z = make_survey(args.points, args.noise, args.seed)
    n_test = args.points // 5
    x_tr, z_tr = torch.from_numpy(xy[n_test:]), torch.from_numpy(z[n_test:])
    x_te, z_te = torch.from_numpy(xy[:n_test]), torch.from_numpy(z[:n_test])
    LOG.info("survey: %d train / %d test points, z range [%.2f, %.2f]", len(x_tr), len(x_te), z.min(), z.max())

    # k-means on the (float64) survey coordinates for the centre initialisation
    t0 = time.time()
    centers, assign = kmeans2(xy[n_test:].astype(np.float64), args.centers, seed=args.seed, minit="++")
    counts = np.bincount(assign, minlength=args.centers)
    LOG.info("kmeans: %d centres in %.2fs, smallest cluster %d points", args.centers, time.time() - t0,
             counts.min())

    model = RBFNet(centers, args.width)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=4)
    LOG.debug("parameters: %s", [(n, tuple(p.shape)) for n, p in model.named_parameters()])

    os.makedirs(args.outdir, exist_ok=True)
    best = float("inf")
    n = len(x_tr)
    g = torch.Generator().manual_seed(args.seed)
    for epoch in range(args.epochs):
        model.train()
        perm = torch.randperm(n, generator=g)
        running = 0.0
        for i in range(0, n, args.batch):
            idx = perm[i:i + args.batch]
            pred = model(x_tr[idx])
            loss = nn.functional.mse_loss(pred, z_tr[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            running += loss.item() * len(idx)
        train_rmse = math.sqrt(running / n)
        test_rmse = rmse(model, x_te, z_te)
        sched.step(test_rmse)
        if epoch % 5 == 0 or epoch == args.epochs - 1:
            LOG.info("epoch %3d  train rmse %.4f  test rmse %.4f  lr %.1e", epoch, train_rmse, test_rmse,
                     opt.param_groups[0]["lr"])
        if test_rmse < best:
            best = test_rmse
            torch.save(model.state_dict(), os.path.join(args.outdir, "rbf_best.pt"))

    widths = torch.exp(model.rbf.log_width.detach())
    LOG.info("done: best test rmse %.4f, widths in [%.3f, %.3f]", best, widths.min(), widths.max())


if __name__ == "__main__":
    main()
