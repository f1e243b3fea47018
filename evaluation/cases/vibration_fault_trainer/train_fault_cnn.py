#!/usr/bin/env python
"""Bearing-fault classifier: accelerometer recordings -> log-STFT -> small CNN.

Production trainer (v2 of the pipeline): structured logging to console + file, resolved
config dumped next to the checkpoints, atomic checkpoints with keep-last-N + best tracking,
resumable from the latest checkpoint.

    python train_fault_cnn.py                       # defaults below
    python train_fault_cnn.py --config exp.json     # JSON overrides
    python train_fault_cnn.py --resume              # continue runs/<exp_name>/ckpt/latest

The recordings are regenerated from the manifest seed (same schema as the plant export:
one recording per row, ~6 s at 1 kHz, label = fault class).
"""
import argparse
import json
import logging
import logging.config
import math
import os
import sys
import time
from collections import defaultdict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

DEFAULTS = {
    "exp_name": "fault_cnn_v2",
    "seed": 1240,
    "manifest_seed": 20240618,
    "n_train": 12000,
    "n_val": 2500,
    "sample_rate": 1000,
    "clip_samples": 4096,
    "n_fft": 256,
    "hop": 64,
    "classes": ["healthy", "inner_race", "outer_race", "ball", "cage", "misalignment"],
    "batch_size": 32,
    "epochs": 12,
    "steps_per_epoch": 120,   # the full set is too big to sweep every epoch
    "lr": 3e-3,
    "weight_decay": 1e-4,
    "warmup_steps": 100,
    "grad_clip": 2.0,
    "log_every": 40,
    "keep_last": 3,
    "num_threads": 1,
}

log = logging.getLogger("faultcnn.train")


def setup_logging(run_dir):
    os.makedirs(run_dir, exist_ok=True)
    logging.config.dictConfig({
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"std": {"format": "%(asctime)s | %(levelname)-7s | %(name)s | %(message)s"}},
        "handlers": {
            "console": {"class": "logging.StreamHandler", "stream": "ext://sys.stdout", "formatter": "std"},
            "file": {"class": "logging.FileHandler", "filename": os.path.join(run_dir, "train.log"),
                     "mode": "a", "formatter": "std"},
        },
        "root": {"level": "INFO", "handlers": ["console", "file"]},
    })


# ----------------------------------------------------------------------------- data
def build_manifest(n, seed, sample_rate):
    rng = np.random.default_rng(seed)
    lengths = rng.normal(6.0, 0.5, size=n) * sample_rate       # ~6 s recordings
    labels = rng.integers(0, 6, size=n)
    rpm = rng.uniform(900, 1800, size=n)
    return [{"gid": i, "rec_id": f"rec-{seed % 1000:03d}-{i:06d}", "n_samples": int(l), "label": int(c),
             "rpm": float(r)}
            for i, (l, c, r) in enumerate(zip(lengths, labels, rpm))]


FAULT_ORDERS = {0: [], 1: [5.4], 2: [3.6], 3: [2.4, 4.8], 4: [0.4], 5: [2.0, 1.0]}


class VibrationDataset(Dataset):
    def __init__(self, manifest, cfg, train):
        self.items, self.cfg, self.train = manifest, cfg, train
        self.rng = np.random.default_rng(cfg["seed"] + (0 if train else 1))
        self.window = torch.hann_window(cfg["n_fft"])

    def __len__(self):
        return len(self.items)

    def _load(self, idx):
        it = self.items[idx]
        r = np.random.default_rng([self.cfg["manifest_seed"], it["gid"]])   # same noise every read
        t = np.arange(it["n_samples"]) / self.cfg["sample_rate"]
        f0 = it["rpm"] / 60.0
        x = 0.3 * np.sin(2 * np.pi * f0 * t)
        for order in FAULT_ORDERS[it["label"]]:
            x += 0.15 * np.sin(2 * np.pi * order * f0 * t + r.uniform(0, 6.28)) * (1 + 0.5 * np.sin(2 * np.pi * f0 * t))
        x += r.normal(0, 0.8, size=x.shape)
        return x.astype(np.float32)

    def __getitem__(self, idx):
        wav = self._load(idx)
        clip = self.cfg["clip_samples"]
        # random window for training, centred window for validation
        if self.train:
            start = int(self.rng.integers(0, max(1, len(wav) - clip)))
        else:
            start = max(0, (len(wav) - clip) // 2)
        seg = torch.from_numpy(wav[start:start + clip])
        spec = torch.stft(seg, self.cfg["n_fft"], hop_length=self.cfg["hop"], window=self.window,
                          return_complex=True).abs().add_(1e-6).log_()
        spec = (spec - spec.mean()) / (spec.std() + 1e-5)
        return spec.unsqueeze(0), self.items[idx]["label"]


# ---------------------------------------------------------------------------- model
def conv_bn(cin, cout, stride=1, pool=True):
    layers = [nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]
    return nn.Sequential(*layers, nn.MaxPool2d(2)) if pool else nn.Sequential(*layers)


class FaultCNN(nn.Module):
    """stem (stride 2) -> 3 conv/pool blocks -> global average pool -> linear."""

    def __init__(self, n_classes, width=16):
        super().__init__()
        self.stem = conv_bn(1, width, stride=2, pool=False)
        self.features = nn.Sequential(conv_bn(width, 2 * width), conv_bn(2 * width, 4 * width),
                                      conv_bn(4 * width, 8 * width))
        self.head = nn.Sequential(nn.Dropout(0.2), nn.Linear(8 * width, n_classes))

    def forward(self, x):
        return self.head(self.features(self.stem(x)).mean((2, 3)))


# ---------------------------------------------------------------------- checkpoints
class CheckpointManager:
    def __init__(self, directory, keep_last=3, mode="max"):
        self.dir, self.keep_last, self.mode = directory, keep_last, mode
        os.makedirs(directory, exist_ok=True)
        self.index_path = os.path.join(directory, "index.json")
        self.index = json.load(open(self.index_path)) if os.path.exists(self.index_path) else {"ckpts": [], "best": None}

    def _better(self, a, b):
        return b is None or (a > b if self.mode == "max" else a < b)

    def save(self, state, step, metric=None):
        name = f"step_{step:07d}.pt"
        tmp = os.path.join(self.dir, name + ".tmp")
        torch.save(state, tmp)
        os.replace(tmp, os.path.join(self.dir, name))           # atomic on POSIX
        self.index["ckpts"].append({"name": name, "step": step, "metric": metric})
        if metric is not None and self._better(metric, (self.index["best"] or {}).get("metric")):
            self.index["best"] = {"name": name, "step": step, "metric": metric}
            log.info("new best checkpoint %s (metric=%.4f)", name, metric)
        self._prune()
        with open(self.index_path + ".tmp", "w") as f:
            json.dump(self.index, f, indent=2)
        os.replace(self.index_path + ".tmp", self.index_path)

    def _prune(self):
        best = (self.index["best"] or {}).get("name")
        while len(self.index["ckpts"]) > self.keep_last:
            old = self.index["ckpts"].pop(0)
            if old["name"] != best and os.path.exists(os.path.join(self.dir, old["name"])):
                os.remove(os.path.join(self.dir, old["name"]))

    def latest(self):
        return os.path.join(self.dir, self.index["ckpts"][-1]["name"]) if self.index["ckpts"] else None


# -------------------------------------------------------------------------- metrics
def macro_f1(conf):
    tp = conf.diag().float()
    prec = tp / conf.sum(0).clamp(min=1)
    rec = tp / conf.sum(1).clamp(min=1)
    return (2 * prec * rec / (prec + rec).clamp(min=1e-9)).mean().item()


@torch.no_grad()
def validate(model, loader, n_classes):
    model.eval()
    conf = torch.zeros(n_classes, n_classes, dtype=torch.long)
    loss_sum, n = 0.0, 0
    for x, y in loader:
        logits = model(x)
        loss_sum += F.cross_entropy(logits, y, reduction="sum").item()
        n += len(y)
        conf += torch.bincount(y * n_classes + logits.argmax(1), minlength=n_classes ** 2).view(n_classes, n_classes)
    return {"val_loss": loss_sum / n, "val_acc": conf.diag().sum().item() / n, "val_f1": macro_f1(conf)}


def lr_at(step, cfg, total):
    if step < cfg["warmup_steps"]:
        return cfg["lr"] * (step + 1) / cfg["warmup_steps"]
    p = (step - cfg["warmup_steps"]) / max(1, total - cfg["warmup_steps"])
    return cfg["lr"] * 0.5 * (1 + math.cos(math.pi * min(1.0, p)))


# ---------------------------------------------------------------------------- train
def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", help="JSON file with overrides")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--run-root", default="runs")
    args = ap.parse_args()
    cfg = dict(DEFAULTS)
    if args.config:
        cfg.update(json.load(open(args.config)))

    run_dir = os.path.join(args.run_root, cfg["exp_name"])
    setup_logging(run_dir)
    json.dump(cfg, open(os.path.join(run_dir, "config.resolved.json"), "w"), indent=2)
    torch.set_num_threads(cfg["num_threads"])
    torch.manual_seed(cfg["seed"])
    np.random.seed(cfg["seed"])
    log.info("torch %s | python %s | threads %d", torch.__version__, sys.version.split()[0], torch.get_num_threads())

    manifest = build_manifest(cfg["n_train"] + cfg["n_val"], cfg["manifest_seed"], cfg["sample_rate"])
    train_set = VibrationDataset(manifest[:cfg["n_train"]], cfg, train=True)
    val_set = VibrationDataset(manifest[cfg["n_train"]:], cfg, train=False)
    g = torch.Generator().manual_seed(cfg["seed"])
    train_loader = DataLoader(train_set, batch_size=cfg["batch_size"], shuffle=True, generator=g, num_workers=0)
    val_loader = DataLoader(val_set, batch_size=128, shuffle=False)
    counts = defaultdict(int)
    for it in manifest[:cfg["n_train"]]:
        counts[cfg["classes"][it["label"]]] += 1
    log.info("train %d recordings (%s) | val %d", len(train_set), dict(counts), len(val_set))

    model = FaultCNN(len(cfg["classes"]))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg["lr"], weight_decay=cfg["weight_decay"])
    ckpt = CheckpointManager(os.path.join(run_dir, "ckpt"), keep_last=cfg["keep_last"])
    log.info("model params: %.2fM", sum(p.numel() for p in model.parameters()) / 1e6)

    step, start_epoch = 0, 0
    if args.resume and ckpt.latest():
        state = torch.load(ckpt.latest())
        model.load_state_dict(state["model"]); opt.load_state_dict(state["opt"])
        step, start_epoch = state["step"], state["epoch"] + 1
        g.set_state(state["loader_rng"])
        log.info("resumed from %s (step %d)", ckpt.latest(), step)

    total = cfg["epochs"] * cfg["steps_per_epoch"]
    try:
        for epoch in range(start_epoch, cfg["epochs"]):
            model.train()
            t_ep, seen, run_loss = time.time(), 0, 0.0
            for i, (x, y) in enumerate(train_loader):
                if i >= cfg["steps_per_epoch"]:
                    break
                for group in opt.param_groups:
                    group["lr"] = lr_at(step, cfg, total)
                loss = F.cross_entropy(model(x), y, label_smoothing=0.05)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["grad_clip"])
                opt.step()
                step += 1
                seen += len(y)
                run_loss += loss.item()
                if step % cfg["log_every"] == 0:
                    log.info("epoch %d step %d | loss %.4f | lr %.2e | gnorm %.2f | %.0f samples/s", epoch, step,
                             run_loss / (i + 1), opt.param_groups[0]["lr"], gnorm, seen / (time.time() - t_ep))
            metrics = validate(model, val_loader, len(cfg["classes"]))
            metrics.update(epoch=epoch, step=step, train_loss=run_loss / cfg["steps_per_epoch"],
                           epoch_sec=round(time.time() - t_ep, 1))
            log.info("epoch %d done | %s", epoch, json.dumps({k: round(v, 4) if isinstance(v, float) else v
                                                               for k, v in metrics.items()}))
            with open(os.path.join(run_dir, "metrics.jsonl"), "a") as f:
                f.write(json.dumps(metrics) + "\n")
            ckpt.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "epoch": epoch,
                       "loader_rng": g.get_state(), "cfg": cfg}, step, metric=metrics["val_f1"])
    except KeyboardInterrupt:
        log.warning("interrupted at step %d", step)
    except Exception:
        log.exception("training failed at step %d (epoch %d)", step, epoch)
        raise
    log.info("finished; best %s", ckpt.index["best"])


if __name__ == "__main__":
    main()
