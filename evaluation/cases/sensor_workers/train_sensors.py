"""Fault detection on HVAC sensor logs.

The logs arrive as CSV-ish text lines ("unit,ts,label,r0|r1|...") and are parsed
lazily in the Dataset so the loader workers do the string work.  A small
Trainer class with callback hooks (progress, early stopping, best-model keeper).
"""
import copy
import logging
import math
import random
import time
from collections import defaultdict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(message)s", datefmt="%H:%M:%S")
logger = logging.getLogger(__name__)

CONFIG = {
    "seed": 2024,
    "n_units": 40,
    "records_per_unit": 60,
    "window": 48,
    "batch_size": 32,
    "num_workers": 2,
    "epochs": 3,
    "lr": 1e-3,
    "patience": 3,
}
FAULTS = ["ok", "stuck_valve", "fan_wear", "refrigerant_leak"]


# ---------------------------------------------------------------------------- synthetic logs
def simulate_unit(rng, unit, n, window):
    base = rng.uniform(18.0, 24.0)
    lines = []
    for k in range(n):
        label = 0 if rng.random() < 0.55 else rng.randrange(1, len(FAULTS))
        t = np.arange(window)
        sig = base + 0.8 * np.sin(2 * np.pi * t / rng.uniform(12, 30))
        if label == 1:
            sig[window // 2:] = sig[window // 2]
        elif label == 2:
            sig = sig + np.linspace(0, rng.uniform(1.0, 2.5), window)
        elif label == 3:
            sig = sig - np.cumsum(np.abs(np.random.default_rng(unit * 1000 + k).normal(0, 0.08, window)))
        sig = sig + np.random.default_rng(unit * 7919 + k).normal(0, 0.3, window)
        readings = "|".join("%.3f" % v for v in sig)
        lines.append("%s,%d,%s,%s" % ("AHU-%03d" % unit, 1700000000 + 300 * k, FAULTS[label], readings))
    return lines


def generate_logs(cfg):
    rng = random.Random(cfg["seed"])
    train, val = [], []
    for unit in range(cfg["n_units"]):
        lines = simulate_unit(rng, unit, cfg["records_per_unit"], cfg["window"])
        (val if unit % 5 == 0 else train).extend(lines)
    # one unit's gateway dropped a reading during a firmware update
    fields = val[137].split(",")
    readings = fields[3].split("|")
    readings[21] = ""
    fields[3] = "|".join(readings)
    val[137] = ",".join(fields)
    return train, val


# ---------------------------------------------------------------------------- dataset
class SensorLogDataset(Dataset):
    def __init__(self, lines, mean=None, std=None):
        self.lines = lines
        self.label_of = {name: i for i, name in enumerate(FAULTS)}
        self.mean, self.std = mean, std

    def __len__(self):
        return len(self.lines)

    def parse(self, line):
        unit, ts, label, readings = line.split(",")
        values = [float(v) for v in readings.split("|")]
        return unit, int(ts), self.label_of[label], values

    def __getitem__(self, i):
        unit, ts, label, values = self.parse(self.lines[i])
        x = torch.tensor(values, dtype=torch.float32)
        if self.mean is not None:
            x = (x - self.mean) / self.std
        dx = torch.diff(x, prepend=x[:1])
        return torch.stack([x, dx]), label

    def stats(self, n=500):
        vals = []
        for line in self.lines[:n]:
            vals.extend(self.parse(line)[3])
        v = np.asarray(vals)
        return float(v.mean()), float(v.std())


# ---------------------------------------------------------------------------- model
class TCNClassifier(nn.Module):
    def __init__(self, in_ch=2, ch=32, n_classes=len(FAULTS)):
        super().__init__()
        layers, c = [], in_ch
        for d in (1, 2, 4):
            layers += [nn.Conv1d(c, ch, 3, padding=d, dilation=d), nn.GroupNorm(4, ch), nn.SiLU()]
            c = ch
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(2 * ch, n_classes)

    def forward(self, x):
        h = self.body(x)
        return self.head(torch.cat([h.mean(-1), h.amax(-1)], 1))


# ---------------------------------------------------------------------------- callbacks
class Callback:
    def on_train_begin(self, trainer): pass
    def on_batch_end(self, trainer, step, logs): pass
    def on_epoch_end(self, trainer, epoch, logs): pass
    def on_train_end(self, trainer): pass


class ProgressLogger(Callback):
    def __init__(self, every=20):
        self.every = every

    def on_batch_end(self, trainer, step, logs):
        if step % self.every == 0:
            logger.info("step %d loss %.4f lr %.2e", step, logs["loss"], trainer.opt.param_groups[0]["lr"])

    def on_epoch_end(self, trainer, epoch, logs):
        logger.info("epoch %d %s", epoch, " ".join("%s=%.4f" % kv for kv in sorted(logs.items())))


class EarlyStopping(Callback):
    def __init__(self, monitor="val_loss", patience=3):
        self.monitor, self.patience, self.best, self.bad = monitor, patience, math.inf, 0

    def on_epoch_end(self, trainer, epoch, logs):
        if logs[self.monitor] < self.best - 1e-4:
            self.best, self.bad = logs[self.monitor], 0
        else:
            self.bad += 1
            if self.bad >= self.patience:
                trainer.stop_training = True


class BestModelKeeper(Callback):
    def __init__(self):
        self.best, self.state = -1.0, None

    def on_epoch_end(self, trainer, epoch, logs):
        if logs["val_f1"] > self.best:
            self.best, self.state = logs["val_f1"], copy.deepcopy(trainer.model.state_dict())

    def on_train_end(self, trainer):
        if self.state is not None:
            trainer.model.load_state_dict(self.state)


def macro_f1(pred, true, n):
    f1s = []
    for c in range(n):
        tp = ((pred == c) & (true == c)).sum().item()
        fp = ((pred == c) & (true != c)).sum().item()
        fn = ((pred != c) & (true == c)).sum().item()
        f1s.append(2 * tp / max(1, 2 * tp + fp + fn))
    return sum(f1s) / n


# ---------------------------------------------------------------------------- trainer
class Trainer:
    def __init__(self, model, cfg, callbacks=()):
        self.model, self.cfg, self.callbacks = model, cfg, list(callbacks)
        self.opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"])
        self.stop_training = False
        self.global_step = 0

    def _fire(self, name, *args):
        for cb in self.callbacks:
            getattr(cb, name)(self, *args)

    def train_epoch(self, loader):
        self.model.train()
        meter = defaultdict(float)
        for x, y in loader:
            loss = F.cross_entropy(self.model(x), y)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            meter["loss"] += loss.item() * len(y)
            meter["n"] += len(y)
            self._fire("on_batch_end", self.global_step, {"loss": loss.item()})
            self.global_step += 1
        return meter["loss"] / meter["n"]

    @torch.no_grad()
    def evaluate(self, loader):
        self.model.eval()
        preds, trues, tot = [], [], 0.0
        for x, y in loader:
            out = self.model(x)
            tot += F.cross_entropy(out, y, reduction="sum").item()
            preds.append(out.argmax(1))
            trues.append(y)
        pred, true = torch.cat(preds), torch.cat(trues)
        return {"val_loss": tot / len(true), "val_acc": (pred == true).float().mean().item(),
                "val_f1": macro_f1(pred, true, len(FAULTS))}

    def fit(self, train_loader, val_loader):
        self._fire("on_train_begin")
        for epoch in range(self.cfg["epochs"]):
            t0 = time.time()
            logs = {"train_loss": self.train_epoch(train_loader)}
            logs.update(self.evaluate(val_loader))
            logs["time"] = time.time() - t0
            self._fire("on_epoch_end", epoch, logs)
            if self.stop_training:
                break
        self._fire("on_train_end")


def main(cfg=CONFIG):
    random.seed(cfg["seed"])
    torch.manual_seed(cfg["seed"])
    train_lines, val_lines = generate_logs(cfg)
    logger.info("%d train / %d val records", len(train_lines), len(val_lines))
    mean, std = SensorLogDataset(train_lines).stats()
    train_ds = SensorLogDataset(train_lines, mean, std)
    val_ds = SensorLogDataset(val_lines, mean, std)
    g = torch.Generator().manual_seed(cfg["seed"])
    train_loader = DataLoader(train_ds, batch_size=cfg["batch_size"], shuffle=True, generator=g,
                              num_workers=cfg["num_workers"], persistent_workers=True)
    val_loader = DataLoader(val_ds, batch_size=cfg["batch_size"] * 2, shuffle=False,
                            num_workers=cfg["num_workers"])
    model = TCNClassifier()
    keeper = BestModelKeeper()
    trainer = Trainer(model, cfg, [ProgressLogger(), EarlyStopping(patience=cfg["patience"]), keeper])
    trainer.fit(train_loader, val_loader)
    logger.info("best val macro-F1 %.3f", keeper.best)


if __name__ == "__main__":
    main()
