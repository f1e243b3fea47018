# ECG-like beat classifier, data-parallel over ranks.
# launch: torchrun --nproc_per_node=2 --standalone ecg_ddp.py
import argparse
import logging
import math
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

log = logging.getLogger("ecg")

BEAT_CLASSES = ["normal", "supraventricular", "ventricular", "fusion"]


def make_signals(n, length, seed):
    """Synthetic beats: a base rhythm plus a class-specific bump and noise."""
    g = torch.Generator().manual_seed(seed)
    t = torch.linspace(0, 2 * math.pi, length)
    labels = torch.randint(0, len(BEAT_CLASSES), (n,), generator=g)
    phase = torch.rand(n, 1, generator=g) * 0.5
    base = torch.sin(3 * t + phase)
    bump_pos = (labels.float() + 1.0).unsqueeze(1) * length / (len(BEAT_CLASSES) + 1)
    idx = torch.arange(length).float().unsqueeze(0)
    bump = torch.exp(-((idx - bump_pos) ** 2) / 18.0) * 2.0
    x = base + bump + 0.3 * torch.randn(n, length, generator=g)
    return x.unsqueeze(1), labels


def build_model(channels, n_classes):
    return nn.Sequential(
        nn.Conv1d(1, channels, 7, padding=3), nn.BatchNorm1d(channels), nn.ReLU(),
        nn.MaxPool1d(2),
        nn.Conv1d(channels, channels * 2, 5, padding=2), nn.BatchNorm1d(channels * 2), nn.ReLU(),
        nn.AdaptiveAvgPool1d(1), nn.Flatten(),
        nn.Dropout(0.1), nn.Linear(channels * 2, n_classes),
    )


def cosine_lr(step, total, base_lr, warmup):
    if step < warmup:
        return base_lr * (step + 1) / warmup
    p = (step - warmup) / max(1, total - warmup)
    return base_lr * 0.5 * (1 + math.cos(math.pi * p))


def train_one_epoch(model, loader, opt, epoch, state, args):
    model.train()
    seen, running = 0, 0.0
    for x, y in loader:
        for group in opt.param_groups:
            group["lr"] = cosine_lr(state["step"], state["total_steps"], args.lr, args.warmup)
        loss = F.cross_entropy(model(x), y, label_smoothing=0.05)
        opt.zero_grad()
        loss.backward()
        opt.step()
        state["step"] += 1
        running += loss.item() * x.shape[0]
        seen += x.shape[0]
    log.info("epoch %d train loss %.4f (%d samples on this rank)", epoch, running / seen, seen)


@torch.no_grad()
def evaluate(model, x_val, y_val, args):
    """Each rank scores its own slice of the validation set; rank 0 builds the confusion matrix."""
    rank, world = dist.get_rank(), dist.get_world_size()
    model.eval()
    mine = torch.arange(x_val.shape[0])[rank::world]
    confusion = torch.zeros(len(BEAT_CLASSES), len(BEAT_CLASSES), dtype=torch.long)
    for start in range(0, mine.numel(), args.eval_batch_size):
        idx = mine[start:start + args.eval_batch_size]
        preds = model(x_val[idx]).argmax(1)
        # one buffer per rank, sized like the eval batch
        pred_bufs = [torch.empty(args.eval_batch_size, dtype=torch.long) for _ in range(world)]
        true_bufs = [torch.empty(args.eval_batch_size, dtype=torch.long) for _ in range(world)]
        dist.all_gather(pred_bufs, preds)
        dist.all_gather(true_bufs, y_val[idx])
        if rank == 0:
            for p, t in zip(pred_bufs, true_bufs):
                confusion.index_put_((t, p), torch.ones_like(p), accumulate=True)
    acc = confusion.diag().sum().item() / max(1, confusion.sum().item())
    return acc, confusion


def save_checkpoint(model, opt, epoch, acc, path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.save({"epoch": epoch, "acc": acc, "model": model.module.state_dict(),
                "opt": opt.state_dict()}, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train-size", type=int, default=1024)
    ap.add_argument("--val-size", type=int, default=255)
    ap.add_argument("--length", type=int, default=96)
    ap.add_argument("--channels", type=int, default=16)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--eval-batch-size", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--ckpt-dir", default="runs/ecg")
    args = ap.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    logging.basicConfig(level=logging.INFO if rank == 0 else logging.WARNING,
                        format=f"%(asctime)s [r{rank}] %(message)s")
    torch.manual_seed(args.seed)

    x_tr, y_tr = make_signals(args.train_size, args.length, args.seed)
    x_val, y_val = make_signals(args.val_size, args.length, args.seed + 1)
    train_ds = TensorDataset(x_tr, y_tr)
    sampler = DistributedSampler(train_ds, shuffle=True, seed=args.seed, drop_last=True)
    loader = DataLoader(train_ds, batch_size=args.batch_size, sampler=sampler)

    model = DistributedDataParallel(build_model(args.channels, len(BEAT_CLASSES)))
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    state = {"step": 0, "total_steps": args.epochs * len(loader)}
    best = 0.0
    for epoch in range(args.epochs):
        t0 = time.time()
        sampler.set_epoch(epoch)
        train_one_epoch(model, loader, opt, epoch, state, args)
        acc, confusion = evaluate(model, x_val, y_val, args)
        log.info("epoch %d val acc %.3f (%.1fs)\n%s", epoch, acc, time.time() - t0, confusion)
        if rank == 0 and acc > best:
            best = acc
            save_checkpoint(model, opt, epoch, acc, os.path.join(args.ckpt_dir, "best.pt"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
