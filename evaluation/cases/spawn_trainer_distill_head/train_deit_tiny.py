# -*- coding: utf-8 -*-
"""Tiny DeiT-style patch transformer on synthetic 16x16 images, trained data-parallel.

Repo layout squeezed into one file for the cluster: CONFIG, model, Trainer, launch().
Usage:  python train_deit_tiny.py
"""
import copy
import os
import socket
import time
from contextlib import closing

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

CONFIG = {
    "model": {"img_size": 16, "patch": 4, "dim": 48, "depth": 2, "heads": 4, "num_classes": 5,
              "distill_token": True},
    "train": {"epochs": 2, "batch_size": 32, "lr": 3e-3, "wd": 0.05, "warmup_steps": 10,
              "distill": False, "label_smoothing": 0.1},
    "data": {"n_train": 1024, "n_val": 128, "seed": 7},
    "dist": {"world_size": 2, "backend": "gloo"},
    "out_dir": "runs/deit_tiny",
}


# ----------------------------------------------------------------------------- model
class PatchEmbed(nn.Module):
    def __init__(self, img_size, patch, dim):
        super().__init__()
        self.proj = nn.Conv2d(1, dim, kernel_size=patch, stride=patch)
        self.num_patches = (img_size // patch) ** 2

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class Block(nn.Module):
    def __init__(self, dim, heads, mlp_ratio=2.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, int(dim * mlp_ratio)), nn.GELU(),
                                 nn.Linear(int(dim * mlp_ratio), dim))

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class DeiTTiny(nn.Module):
    def __init__(self, img_size, patch, dim, depth, heads, num_classes, distill_token=True):
        super().__init__()
        self.patch_embed = PatchEmbed(img_size, patch, dim)
        n_tok = 2 if distill_token else 1
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.dist_token = nn.Parameter(torch.zeros(1, 1, dim)) if distill_token else None
        self.pos_embed = nn.Parameter(torch.zeros(1, self.patch_embed.num_patches + n_tok, dim))
        self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)
        self.head_dist = nn.Linear(dim, num_classes) if distill_token else None
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        if self.dist_token is not None:
            nn.init.trunc_normal_(self.dist_token, std=0.02)

    def forward(self, x, with_distill=False):
        x = self.patch_embed(x)
        b = x.shape[0]
        toks = [self.cls_token.expand(b, -1, -1)]
        if self.dist_token is not None:
            toks.append(self.dist_token.expand(b, -1, -1))
        x = torch.cat(toks + [x], dim=1) + self.pos_embed
        for blk in self.blocks:
            x = blk(x)
        x = self.norm(x)
        logits = self.head(x[:, 0])
        if with_distill and self.head_dist is not None:
            return logits, self.head_dist(x[:, 1])
        return logits


# ----------------------------------------------------------------------------- data
def make_shapes(n, img_size, num_classes, seed):
    """Five classes of noisy oriented bars."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, num_classes, (n,), generator=g)
    xs = torch.linspace(-1, 1, img_size)
    yy, xx = torch.meshgrid(xs, xs, indexing="ij")
    angles = y.float() * (3.14159 / num_classes)
    bars = torch.cos(8 * (xx[None] * torch.cos(angles)[:, None, None] + yy[None] * torch.sin(angles)[:, None, None]))
    x = bars + 0.5 * torch.randn(n, img_size, img_size, generator=g)
    return x.unsqueeze(1), y


# ----------------------------------------------------------------------------- trainer
class Trainer:
    def __init__(self, rank, world_size, cfg):
        self.rank, self.world_size, self.cfg = rank, world_size, cfg
        self.is_main = rank == 0
        torch.manual_seed(cfg["data"]["seed"])
        self.model = self._build_model()
        self.teacher = None
        if cfg["train"]["distill"]:
            self.teacher = copy.deepcopy(self.model.module).eval()
        self.train_loader, self.val_loader, self.sampler = self._build_loaders()
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=cfg["train"]["lr"],
                                           weight_decay=cfg["train"]["wd"])
        total = cfg["train"]["epochs"] * len(self.train_loader)
        warm = cfg["train"]["warmup_steps"]
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min(1.0, (s + 1) / warm) * max(0.0, 1 - s / total))
        self.step = 0

    def _build_model(self):
        model = DeiTTiny(**self.cfg["model"])
        return DDP(model, find_unused_parameters=False)

    def _build_loaders(self):
        d = self.cfg["data"]
        m = self.cfg["model"]
        x, y = make_shapes(d["n_train"] + d["n_val"], m["img_size"], m["num_classes"], d["seed"])
        train = TensorDataset(x[: d["n_train"]], y[: d["n_train"]])
        val = TensorDataset(x[d["n_train"]:], y[d["n_train"]:])
        sampler = DistributedSampler(train, num_replicas=self.world_size, rank=self.rank, shuffle=True, seed=d["seed"])
        bs = self.cfg["train"]["batch_size"]
        return (DataLoader(train, batch_size=bs, sampler=sampler, drop_last=True),
                DataLoader(val, batch_size=128), sampler)

    def _loss(self, images, labels):
        t = self.cfg["train"]
        if self.teacher is not None:
            logits, logits_dist = self.model(images, with_distill=True)
            with torch.no_grad():
                soft = self.teacher(images).argmax(-1)
            return 0.5 * F.cross_entropy(logits, labels, label_smoothing=t["label_smoothing"]) + \
                0.5 * F.cross_entropy(logits_dist, soft)
        logits = self.model(images)
        return F.cross_entropy(logits, labels, label_smoothing=t["label_smoothing"])

    def train_epoch(self, epoch):
        self.model.train()
        self.sampler.set_epoch(epoch)
        t0, running = time.time(), 0.0
        for images, labels in self.train_loader:
            loss = self._loss(images, labels)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.optimizer.step()
            self.scheduler.step()
            self.step += 1
            running += loss.item()
            if self.is_main and self.step % 8 == 0:
                print(f"[ep {epoch} it {self.step}] loss {running / 8:.4f} ({time.time() - t0:.1f}s)", flush=True)
                running = 0.0

    @torch.no_grad()
    def evaluate(self):
        self.model.eval()
        correct = total = 0
        for images, labels in self.val_loader:
            correct += (self.model.module(images).argmax(-1) == labels).sum().item()
            total += labels.numel()
        return correct / total

    def save(self, epoch):
        if not self.is_main:
            return
        os.makedirs(self.cfg["out_dir"], exist_ok=True)
        torch.save({"epoch": epoch, "model": self.model.module.state_dict()},
                   os.path.join(self.cfg["out_dir"], "last.pt"))

    def fit(self):
        for epoch in range(self.cfg["train"]["epochs"]):
            self.train_epoch(epoch)
            acc = self.evaluate()
            if self.is_main:
                print(f"epoch {epoch}: val acc {acc:.3f}", flush=True)
            self.save(epoch)


# ----------------------------------------------------------------------------- launch
def find_free_port():
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("", 0))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        return s.getsockname()[1]


def worker(rank, world_size, port, cfg):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group(cfg["dist"]["backend"], rank=rank, world_size=world_size)
    try:
        Trainer(rank, world_size, cfg).fit()
    finally:
        dist.destroy_process_group()


def launch(cfg):
    world_size = cfg["dist"]["world_size"]
    port = find_free_port()
    print(f"spawning {world_size} workers, rendezvous on port {port}")
    mp.spawn(worker, args=(world_size, port, cfg), nprocs=world_size, join=True)


if __name__ == "__main__":
    launch(CONFIG)
