"""Bird's-eye-view 'pillar' classifier for small synthetic point clouds.

Points -> per-point MLP -> mean-pooled into a GxG BEV grid (scatter) -> small CNN -> class.
Clouds have different sizes, so batches are built by a custom collate_fn that
concatenates points and keeps a per-point batch index. The class mix is skewed, so the
loader uses a WeightedRandomSampler.
"""
import argparse
import collections
import math
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, WeightedRandomSampler

SHAPES = ("sphere", "box", "cylinder", "cone", "torus")
CLASS_PRIOR = (0.40, 0.25, 0.15, 0.12, 0.08)


def sample_shape(kind, n, rng):
    if kind == "sphere":
        p = rng.normal(size=(n, 3))
        p /= np.linalg.norm(p, axis=1, keepdims=True)
    elif kind == "box":
        p = rng.uniform(-1, 1, size=(n, 3))
        ax = rng.integers(0, 3, n)
        p[np.arange(n), ax] = np.sign(p[np.arange(n), ax])
        p *= np.array([1.0, 0.6, 0.4])
    elif kind == "cylinder":
        th, z = rng.uniform(0, 2 * np.pi, n), rng.uniform(-1, 1, n)
        p = np.stack([0.5 * np.cos(th), 0.5 * np.sin(th), z], 1)
    elif kind == "cone":
        th, h = rng.uniform(0, 2 * np.pi, n), rng.uniform(0, 1, n)
        p = np.stack([(1 - h) * np.cos(th), (1 - h) * np.sin(th), 2 * h - 1], 1)
    else:  # torus
        u, v = rng.uniform(0, 2 * np.pi, n), rng.uniform(0, 2 * np.pi, n)
        p = np.stack([(0.7 + 0.25 * np.cos(v)) * np.cos(u), (0.7 + 0.25 * np.cos(v)) * np.sin(u),
                      0.25 * np.sin(v)], 1)
    # random yaw + anisotropic scale + sensor noise
    a = rng.uniform(0, 2 * np.pi)
    rot = np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])
    p = p @ rot.T * rng.uniform(0.7, 1.3, size=3)
    return p + rng.normal(0, 0.02, size=p.shape)


class ShapeClouds(Dataset):
    def __init__(self, n, seed, min_pts=150, max_pts=500):
        rng = np.random.default_rng(seed)
        self.labels = rng.choice(len(SHAPES), size=n, p=CLASS_PRIOR)
        self.clouds = []
        for y in self.labels:
            pts = sample_shape(SHAPES[y], int(rng.integers(min_pts, max_pts)), rng)
            intensity = rng.uniform(0, 1, size=(len(pts), 1))
            self.clouds.append(np.concatenate([pts, intensity], 1).astype(np.float32))

    def __len__(self):
        return len(self.clouds)

    @staticmethod
    def normalize(cloud):
        xyz = cloud[:, :3] - cloud[:, :3].mean(0)
        # scale so the BEV footprint spans [-1, 1]
        scale = np.abs(xyz[:, :2]).max()
        out = cloud.copy()
        out[:, :3] = xyz / scale
        return out

    def __getitem__(self, i):
        return torch.from_numpy(self.normalize(self.clouds[i])), int(self.labels[i])


def collate_clouds(batch):
    pts, labels = zip(*batch)
    sizes = torch.tensor([len(p) for p in pts])
    points = torch.cat(pts, 0)
    batch_index = torch.repeat_interleave(torch.arange(len(pts)), sizes)
    return {"points": points, "batch_index": batch_index, "sizes": sizes, "labels": torch.tensor(labels)}


def balanced_sampler(labels, seed):
    counts = np.bincount(labels, minlength=len(SHAPES))
    w = 1.0 / counts[labels]
    return WeightedRandomSampler(torch.as_tensor(w, dtype=torch.double), num_samples=len(labels),
                                 replacement=True, generator=torch.Generator().manual_seed(seed))


class PillarScatter(nn.Module):
    """Mean-pool per-point features into a (B, C, G, G) bird's-eye-view canvas."""

    def __init__(self, grid):
        super().__init__()
        self.grid = grid

    def forward(self, feats, xy, batch_index, batch_size):
        G = self.grid
        cell = ((xy + 1.0) * 0.5 * G).long()              # [-1, 1] -> {0..G-1}
        flat = batch_index * G * G + cell[:, 0] * G + cell[:, 1]
        C = feats.shape[1]
        canvas = feats.new_zeros(batch_size * G * G, C)
        canvas.index_add_(0, flat, feats)
        count = feats.new_zeros(batch_size * G * G).index_add_(0, flat, torch.ones_like(feats[:, 0]))
        canvas = canvas / count.clamp(min=1).unsqueeze(1)
        return canvas.view(batch_size, G, G, C).permute(0, 3, 1, 2)


class PillarNet(nn.Module):
    def __init__(self, grid=16, point_dim=4, feat=32, n_classes=len(SHAPES)):
        super().__init__()
        self.point_mlp = nn.Sequential(nn.Linear(point_dim, feat), nn.ReLU(), nn.Linear(feat, feat), nn.ReLU())
        self.scatter = PillarScatter(grid)
        self.bev = nn.Sequential(
            nn.Conv2d(feat, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.cls = nn.Linear(64, n_classes)

    def forward(self, points, batch_index, batch_size):
        f = self.point_mlp(points)
        bev = self.scatter(f, points[:, :2], batch_index, batch_size)
        return self.cls(self.bev(bev).flatten(1))


def run(args):
    torch.manual_seed(args.seed)
    train_ds = ShapeClouds(args.n_train, seed=args.seed)
    val_ds = ShapeClouds(args.n_val, seed=args.seed + 100)
    print("train class counts:", dict(collections.Counter(SHAPES[y] for y in train_ds.labels)))

    train_dl = DataLoader(train_ds, batch_size=args.batch_size, sampler=balanced_sampler(train_ds.labels, args.seed),
                          collate_fn=collate_clouds, num_workers=0)
    val_dl = DataLoader(val_ds, batch_size=64, shuffle=False, collate_fn=collate_clouds)

    model = PillarNet(grid=args.grid)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, nesterov=True, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=args.epochs * len(train_dl))

    for epoch in range(args.epochs):
        model.train()
        t0, seen, loss_sum = time.time(), 0, 0.0
        for step, b in enumerate(train_dl):
            logits = model(b["points"], b["batch_index"], len(b["labels"]))
            loss = F.cross_entropy(logits, b["labels"])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            loss_sum += loss.item() * len(b["labels"])
            seen += len(b["labels"])
            if step % args.log_every == 0:
                print(f"  ep {epoch} step {step:3d} loss {loss.item():.3f} lr {sched.get_last_lr()[0]:.4f}")

        model.eval()
        conf = torch.zeros(len(SHAPES), len(SHAPES), dtype=torch.long)
        with torch.no_grad():
            for b in val_dl:
                pred = model(b["points"], b["batch_index"], len(b["labels"])).argmax(1)
                for t, p in zip(b["labels"].tolist(), pred.tolist()):
                    conf[t, p] += 1
        per_class = conf.diag().float() / conf.sum(1).clamp(min=1)
        print(f"epoch {epoch}: train loss {loss_sum / seen:.3f}, val acc {conf.diag().sum().item() / conf.sum().item():.3f}, "
              f"balanced acc {per_class.mean():.3f} ({time.time() - t0:.1f}s)")
    os.makedirs(args.out, exist_ok=True)
    torch.save(model.state_dict(), os.path.join(args.out, "pillarnet.pt"))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-train", type=int, default=800)
    ap.add_argument("--n-val", type=int, default=200)
    ap.add_argument("--grid", type=int, default=16)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--log-every", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="checkpoints")
    run(ap.parse_args())
