"""Shape recogniser (circle / square / cross) on 16x16 sketches.

The data arrive as shards; every rank takes the shards whose index matches its rank.
    torchrun --nproc_per_node=2 --standalone train.py --epochs 2
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from metrics import AverageMeter, ConfusionMatrix

CLASSES = ("circle", "square", "cross")


def draw(kind, size, g):
    c = torch.randint(5, size - 5, (2,), generator=g).float()
    r = 2 + torch.rand(1, generator=g).item() * 2.5
    yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
    if kind == 0:
        img = ((((yy - c[0]) ** 2 + (xx - c[1]) ** 2).sqrt() - r).abs() < 0.8).float()
    elif kind == 1:
        img = (torch.maximum((yy - c[0]).abs(), (xx - c[1]).abs()) - r).abs().lt(0.6).float()
    else:
        img = (((yy - c[0]).abs() < 0.7) & ((xx - c[1]).abs() < r)).float()
        img += (((xx - c[1]).abs() < 0.7) & ((yy - c[0]).abs() < r)).float()
    return (img.clamp(max=1) + 0.15 * torch.randn(size, size, generator=g)).unsqueeze(0)


def make_shards(n_shards, per_shard, size, seed):
    shards = []
    for s in range(n_shards):
        g = torch.Generator().manual_seed(seed * 1000 + s)
        ys = torch.randint(0, len(CLASSES), (per_shard,), generator=g)
        xs = torch.stack([draw(int(k), size, g) for k in ys])
        shards.append((xs, ys))
    return shards


def my_shards(shards, rank, world):
    return shards[rank::world]


class SketchNet(nn.Module):
    def __init__(self, width=16):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.fc = nn.Linear(2 * width * 16, len(CLASSES))

    def forward(self, x):
        return self.fc(self.features(x).flatten(1))


def batches(shards, batch_size, shuffle, seed):
    for xs, ys in shards:
        order = torch.randperm(len(ys), generator=torch.Generator().manual_seed(seed)) if shuffle \
            else torch.arange(len(ys))
        for i in range(0, len(ys), batch_size):
            idx = order[i:i + batch_size]
            yield xs[idx], ys[idx]


def train_epoch(model, opt, shards, args, epoch):
    model.train()
    meter = AverageMeter("train_loss")
    for x, y in batches(shards, args.batch_size, True, args.seed + epoch):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        meter.update(loss.item(), len(y))
    return meter.all_reduce()


@torch.no_grad()
def validate(model, shards, args):
    model.eval()
    meter, cm = AverageMeter("val_loss"), ConfusionMatrix(len(CLASSES))
    for x, y in batches(shards, args.batch_size, False, 0):
        logits = model(x)
        meter.update(F.cross_entropy(logits, y).item(), len(y))
        cm.update(logits.argmax(1), y)
    return meter.all_reduce(), cm.all_reduce()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--train-shards", type=int, default=4)
    p.add_argument("--val-shards", type=int, default=1)
    p.add_argument("--per-shard", type=int, default=128)
    p.add_argument("--size", type=int, default=16)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--save", default="sketchnet.pt")
    args = p.parse_args()

    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    train = my_shards(make_shards(args.train_shards, args.per_shard, args.size, args.seed), rank, world)
    val = my_shards(make_shards(args.val_shards, args.per_shard, args.size, args.seed + 1), rank, world)
    model = DDP(SketchNet())
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    for epoch in range(args.epochs):
        t0 = time.time()
        train_loss = train_epoch(model, opt, train, args, epoch)
        val_loss, cm = validate(model, val, args)
        if rank == 0:
            recall = ConfusionMatrix(len(CLASSES))
            recall.m = cm
            print(f"epoch {epoch} train {train_loss:.4f} val {val_loss:.4f} "
                  f"recall {[round(r, 3) for r in recall.per_class_recall()]} ({time.time() - t0:.1f}s)",
                  flush=True)
            torch.save(model.module.state_dict(), args.save)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
