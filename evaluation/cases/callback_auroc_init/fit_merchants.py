"""Merchant-category classification of card transactions, with a Keras-like fit().

A tiny in-house training framework (Model.compile/fit with callbacks) around a plain
nn.Module; metrics come from torchmetrics.
"""
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torchmetrics import AUROC
from torchmetrics.classification import MulticlassAccuracy

CATEGORIES = ["grocery", "fuel", "travel", "restaurants", "online", "pharmacy"]


def synth_transactions(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, len(CATEGORIES), (n,), generator=g)
    hour = (torch.tensor([9.0, 7.0, 14.0, 20.0, 22.0, 11.0])[y] + 2.5 * torch.randn(n, generator=g)) % 24
    amount = torch.exp(torch.tensor([3.5, 3.8, 6.0, 3.9, 3.2, 2.9])[y] + 0.6 * torch.randn(n, generator=g))
    weekend = (torch.rand(n, generator=g) < torch.tensor([0.3, 0.3, 0.5, 0.45, 0.35, 0.2])[y]).float()
    x = torch.stack([torch.sin(2 * math.pi * hour / 24), torch.cos(2 * math.pi * hour / 24),
                     torch.log1p(amount) / 5, weekend, torch.randn(n, generator=g)], dim=1)
    return x, y


class Callback:
    def on_fit_start(self, trainer): pass
    def on_epoch_end(self, trainer, epoch, logs): pass
    def on_fit_end(self, trainer): pass


class MetricsCallback(Callback):
    """Computes validation AUROC and macro accuracy at the end of every epoch."""

    def __init__(self, num_classes, every=1):
        super().__init__()
        self.every = every
        self.auroc = AUROC(num_classes=num_classes)
        self.accuracy = MulticlassAccuracy(num_classes=num_classes, average="macro")

    def on_epoch_end(self, trainer, epoch, logs):
        if epoch % self.every:
            return
        probs, targets = trainer.predict_proba(trainer.val_data[0]), trainer.val_data[1]
        logs["val_auroc"] = self.auroc(probs, targets).item()
        logs["val_acc"] = self.accuracy(probs, targets).item()
        self.auroc.reset()
        self.accuracy.reset()


class EarlyStopping(Callback):
    def __init__(self, monitor="val_loss", patience=3):
        self.monitor, self.patience, self.best, self.wait = monitor, patience, math.inf, 0

    def on_epoch_end(self, trainer, epoch, logs):
        if logs[self.monitor] < self.best:
            self.best, self.wait = logs[self.monitor], 0
        else:
            self.wait += 1
            trainer.stop_training = self.wait >= self.patience


class Trainer:
    def __init__(self, module, optimizer, loss_fn, callbacks=()):
        self.module, self.optimizer, self.loss_fn = module, optimizer, loss_fn
        self.callbacks = list(callbacks)
        self.stop_training = False
        self.history = []

    @torch.no_grad()
    def predict_proba(self, x):
        self.module.eval()
        return F.softmax(self.module(x), dim=-1)

    def fit(self, train_data, val_data, epochs=10, batch_size=64, seed=0):
        self.val_data = val_data
        x, y = train_data
        g = torch.Generator().manual_seed(seed)
        for cb in self.callbacks:
            cb.on_fit_start(self)
        for epoch in range(epochs):
            t0 = time.time()
            self.module.train()
            perm = torch.randperm(len(x), generator=g)
            for i in range(0, len(x), batch_size):
                b = perm[i:i + batch_size]
                loss = self.loss_fn(self.module(x[b]), y[b])
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
            with torch.no_grad():
                self.module.eval()
                val_loss = self.loss_fn(self.module(val_data[0]), val_data[1]).item()
            logs = {"loss": loss.item(), "val_loss": val_loss}
            for cb in self.callbacks:
                cb.on_epoch_end(self, epoch, logs)
            self.history.append(logs)
            print(f"epoch {epoch:2d} " + " ".join(f"{k}={v:.4f}" for k, v in logs.items())
                  + f" ({time.time() - t0:.1f}s)")
            if self.stop_training:
                break
        for cb in self.callbacks:
            cb.on_fit_end(self)
        return self.history


def main():
    torch.manual_seed(0)
    x, y = synth_transactions(4000, seed=0)
    n_val = 800
    train_data, val_data = (x[n_val:], y[n_val:]), (x[:n_val], y[:n_val])
    module = nn.Sequential(nn.Linear(x.shape[1], 64), nn.ReLU(), nn.Dropout(0.1),
                           nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, len(CATEGORIES)))
    trainer = Trainer(
        module,
        torch.optim.Adam(module.parameters(), lr=2e-3),
        nn.CrossEntropyLoss(label_smoothing=0.05),
        callbacks=[MetricsCallback(num_classes=len(CATEGORIES)), EarlyStopping(patience=3)],
    )
    history = trainer.fit(train_data, val_data, epochs=15)
    print("best val_auroc:", max(h["val_auroc"] for h in history))


if __name__ == "__main__":
    main()
