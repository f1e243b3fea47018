"""Domain-adversarial training (DANN) on two synthetic domains.

The loss is compiled (fullgraph) because it is the hot path: task CE on the
labelled source batch, plus a domain classifier behind a gradient-reversal
layer whose gradient is clipped relative to the feature scale."""
import argparse
import math
import os
import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def seed_everything(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def make_domain(n, shift, rot, seed):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 3, (n,), generator=g)
    centers = torch.tensor([[2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7]])
    x = centers[y] + 0.6 * torch.randn(n, 2, generator=g)
    c, s = math.cos(rot), math.sin(rot)
    x = x @ torch.tensor([[c, -s], [s, c]]) + shift
    x = torch.cat([x, 0.1 * torch.randn(n, 6, generator=g)], dim=1)  # nuisance dims
    return x, y


class GradReverse(torch.autograd.Function):
    """Identity forward; backward multiplies by -lambda and clips to a multiple of
    the forward activation scale (keeps the adversary from blowing up early)."""

    @staticmethod
    def forward(ctx, x, lambd):
        ctx.lambd = lambd
        ctx.clip = 5.0 * x.detach().abs().max().item()
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        g = (-ctx.lambd * grad).clamp(-ctx.clip, ctx.clip)
        return g, None


class FeatureNet(nn.Module):
    def __init__(self, d_in=8, d=32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, d), nn.ReLU(), nn.Linear(d, d), nn.ReLU())

    def forward(self, x):
        return self.net(x)


def dann_loss(feat_s, feat_t, y_s, clf, disc, lambd):
    task = F.cross_entropy(clf(feat_s), y_s)
    feats = torch.cat([feat_s, feat_t], dim=0)
    rev = GradReverse.apply(feats, lambd)
    dom_logits = disc(rev).squeeze(-1)
    dom_y = torch.cat([torch.zeros(len(feat_s)), torch.ones(len(feat_t))])
    dom = F.binary_cross_entropy_with_logits(dom_logits, dom_y)
    return task + dom, task.detach(), dom.detach()


def lambda_schedule(step, total, gamma=10.0):
    p = step / max(1, total)
    return 2.0 / (1.0 + math.exp(-gamma * p)) - 1.0


def evaluate(feat, clf, x, y):
    with torch.no_grad():
        return (clf(feat(x)).argmax(-1) == y).float().mean().item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--out", default="dann_ckpt")
    args = ap.parse_args()

    seed_everything(0)
    xs, ys = make_domain(1536, shift=torch.tensor([0.0, 0.0]), rot=0.0, seed=1)
    xt, yt = make_domain(1536, shift=torch.tensor([1.5, -0.5]), rot=0.6, seed=2)

    feat = FeatureNet()
    clf = nn.Linear(32, 3)
    disc = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1))
    params = list(feat.parameters()) + list(clf.parameters()) + list(disc.parameters())
    opt = torch.optim.Adam(params, lr=args.lr)

    loss_fn = dann_loss if args.no_compile else torch.compile(dann_loss, fullgraph=True)

    steps_per_epoch = len(xs) // args.batch
    total = args.epochs * steps_per_epoch
    step = 0
    print(f"source-only baseline acc on target: {evaluate(feat, clf, xt, yt):.3f}")
    for epoch in range(args.epochs):
        ps, pt = torch.randperm(len(xs)), torch.randperm(len(xt))
        run_task = run_dom = 0.0
        for i in range(steps_per_epoch):
            bs = ps[i * args.batch:(i + 1) * args.batch]
            bt = pt[i * args.batch:(i + 1) * args.batch]
            lambd = lambda_schedule(step, total)
            loss, task, dom = loss_fn(feat(xs[bs]), feat(xt[bt]), ys[bs], clf, disc, lambd)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 5.0)
            opt.step()
            run_task += task.item()
            run_dom += dom.item()
            step += 1
        print(f"epoch {epoch} task {run_task / steps_per_epoch:.3f} dom {run_dom / steps_per_epoch:.3f} "
              f"src acc {evaluate(feat, clf, xs, ys):.3f} tgt acc {evaluate(feat, clf, xt, yt):.3f}")

    os.makedirs(args.out, exist_ok=True)
    torch.save({"feat": feat.state_dict(), "clf": clf.state_dict()}, os.path.join(args.out, "dann.pt"))


if __name__ == "__main__":
    main()
