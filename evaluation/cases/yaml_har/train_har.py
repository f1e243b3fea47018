import argparse
import copy
import csv
import math
import os
import random
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import yaml
from torch.utils.data import DataLoader, TensorDataset


def load_config(path, overrides=()):
    with open(path) as f:
        cfg = yaml.safe_load(f)
    for ov in overrides:  # a.b.c=value
        keys, val = ov.split("=", 1)
        node = cfg
        *parents, leaf = keys.split(".")
        for k in parents:
            node = node[k]
        node[leaf] = yaml.safe_load(val)
    return cfg


# ----------------------------------------------------------------------------- data

def simulate_subject(subject, cfg, rng):
    """Crude IMU simulator: each activity has its own dominant frequency/amplitude."""
    fs = cfg["sample_rate_hz"]
    n = int(cfg["minutes_per_subject"] * 60 * fs)
    acts = cfg["activities"]
    seg = 10 * fs  # 10 s segments
    sig = np.zeros((n, 3), np.float32)
    labels = np.zeros(n, np.int64)
    t = np.arange(seg) / fs
    for start in range(0, n, seg):
        a = rng.integers(len(acts))
        freq = [1.8, 2.0, 2.2, 0.0, 0.0, 0.0][a] * rng.uniform(0.9, 1.1)
        amp = [1.0, 1.3, 1.5, 0.05, 0.08, 0.03][a]
        grav = np.array([[0, 0, 1], [0, 0.2, 1], [0, -0.2, 1], [0.7, 0, 0.7], [0, 0, 1], [1, 0, 0]][a])
        chunk = grav + amp * np.sin(2 * np.pi * freq * t)[:, None] * rng.uniform(0.3, 1, 3)
        chunk += rng.normal(0, 0.05 + 0.01 * subject, chunk.shape)
        m = min(seg, n - start)
        sig[start:start + m] = chunk[:m]
        labels[start:start + m] = a
    return sig, labels


def derive_channels(acc, names):
    cols = {"acc_x": acc[:, 0], "acc_y": acc[:, 1], "acc_z": acc[:, 2]}
    # gyroscope magnitude is approximated from the jerk of the accelerometer
    jerk = np.diff(acc, axis=0, prepend=acc[:1])
    cols["gyro_norm"] = np.linalg.norm(jerk, axis=1)
    cols["acc_norm"] = np.linalg.norm(acc, axis=1)
    return np.stack([cols[c] for c in names], axis=0)  # (C, N)


def windows(x, y, window, stride):
    xs, ys = [], []
    for s in range(0, x.shape[1] - window + 1, stride):
        xs.append(x[:, s:s + window])
        vals, counts = np.unique(y[s:s + window], return_counts=True)
        ys.append(vals[counts.argmax()])
    return np.stack(xs), np.array(ys)


def build_datasets(dcfg, seed):
    rng = np.random.default_rng(seed)
    splits = {}
    for split in ("train", "val"):
        X, Y = [], []
        for subj in dcfg[f"subjects_{split}"]:
            acc, lab = simulate_subject(subj, dcfg, rng)
            ch = derive_channels(acc, dcfg["channels"])
            xw, yw = windows(ch, lab, dcfg["window"], dcfg["stride"])
            X.append(xw)
            Y.append(yw)
        splits[split] = (np.concatenate(X).astype(np.float32), np.concatenate(Y))
    if dcfg.get("normalize") == "per_channel":
        mu = splits["train"][0].mean(axis=(0, 2), keepdims=True)
        sd = splits["train"][0].std(axis=(0, 2), keepdims=True) + 1e-6
        splits = {k: ((x - mu) / sd, y) for k, (x, y) in splits.items()}
    return {k: TensorDataset(torch.from_numpy(x), torch.from_numpy(y)) for k, (x, y) in splits.items()}


# ----------------------------------------------------------------------------- model

class TemporalBlock(nn.Module):
    def __init__(self, cin, cout, k, dilation, dropout):
        super().__init__()
        pad = (k - 1) * dilation // 2
        self.conv1 = nn.Conv1d(cin, cout, k, padding=pad, dilation=dilation)
        self.conv2 = nn.Conv1d(cout, cout, k, padding=pad, dilation=dilation)
        self.bn1, self.bn2 = nn.BatchNorm1d(cout), nn.BatchNorm1d(cout)
        self.drop = nn.Dropout(dropout)
        self.skip = nn.Conv1d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x):
        h = self.drop(F.relu(self.bn1(self.conv1(x))))
        h = self.bn2(self.conv2(h))
        return F.relu(h + self.skip(x))


class TCN(nn.Module):
    def __init__(self, in_channels, hidden, kernel_size, dilation_growth, dropout, n_classes):
        super().__init__()
        layers, cin = [], in_channels
        for i, h in enumerate(hidden):
            layers.append(TemporalBlock(cin, h, kernel_size, dilation_growth ** i, dropout))
            cin = h
        self.body = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, n_classes)

    def forward(self, x):
        return self.fc(self.body(x).mean(dim=-1))


MODELS = {"tcn": TCN}


def build_model(mcfg, n_classes):
    kw = {k: v for k, v in mcfg.items() if k != "name"}
    return MODELS[mcfg["name"]](n_classes=n_classes, **kw)


def build_optimizer(ocfg, params, steps_per_epoch):
    opt = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam}[ocfg["name"]](
        params, lr=ocfg["lr"], weight_decay=ocfg["weight_decay"])
    sched = None
    if ocfg.get("scheduler") == "onecycle":
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=ocfg["lr"], epochs=ocfg["epochs"],
                                                    steps_per_epoch=steps_per_epoch)
    return opt, sched


# ----------------------------------------------------------------------------- loop

def run_epoch(model, loader, opt=None, sched=None, log_every=0, writer=None, epoch=0):
    train = opt is not None
    model.train(train)
    tot_loss, correct, n = 0.0, 0, 0
    with torch.set_grad_enabled(train):
        for step, (x, y) in enumerate(loader):
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            if train:
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                if sched is not None:
                    sched.step()
            tot_loss += loss.item() * len(y)
            correct += (logits.argmax(1) == y).sum().item()
            n += len(y)
            if train and log_every and step % log_every == 0:
                writer.writerow([epoch, step, f"{loss.item():.5f}", f"{opt.param_groups[0]['lr']:.6f}"])
    return tot_loss / n, correct / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "config.yaml"))
    ap.add_argument("overrides", nargs="*", help="dotted key=value overrides")
    args = ap.parse_args()
    cfg = load_config(args.config, args.overrides)

    random.seed(cfg["seed"])
    np.random.seed(cfg["seed"])
    torch.manual_seed(cfg["seed"])

    out_dir = cfg["logging"]["out_dir"]
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.resolved.yaml"), "w") as f:
        yaml.safe_dump(cfg, f)

    ds = build_datasets(cfg["data"], cfg["seed"])
    print({k: len(v) for k, v in ds.items()}, "windows;", "input shape", tuple(ds["train"][0][0].shape))
    ocfg = cfg["optim"]
    train_dl = DataLoader(ds["train"], batch_size=ocfg["batch_size"], shuffle=True,
                          generator=torch.Generator().manual_seed(cfg["seed"]))
    val_dl = DataLoader(ds["val"], batch_size=256)

    model = build_model(cfg["model"], n_classes=len(cfg["data"]["activities"]))
    opt, sched = build_optimizer(ocfg, model.parameters(), len(train_dl))

    best_acc, best_state = 0.0, None
    with open(os.path.join(out_dir, "steps.csv"), "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["epoch", "step", "loss", "lr"])
        for epoch in range(ocfg["epochs"]):
            t0 = time.time()
            tr_loss, tr_acc = run_epoch(model, train_dl, opt, sched, cfg["logging"]["every_n_steps"], writer, epoch)
            va_loss, va_acc = run_epoch(model, val_dl)
            print(f"[{cfg['experiment']}] ep{epoch} train {tr_loss:.3f}/{tr_acc:.3f} "
                  f"val {va_loss:.3f}/{va_acc:.3f} {time.time() - t0:.1f}s")
            if va_acc > best_acc:
                best_acc, best_state = va_acc, copy.deepcopy(model.state_dict())
    if cfg["logging"]["save_best"] and best_state is not None:
        torch.save(best_state, os.path.join(out_dir, "best.pt"))
    print(f"best val acc {best_acc:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
