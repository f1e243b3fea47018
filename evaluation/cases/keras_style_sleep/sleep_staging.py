"""Sleep staging from 2-channel EEG, with a small Keras-like fit() API on top of PyTorch.

Each 30 s scoring epoch is 2 x 1200 samples (40 Hz). The network looks at N_CROPS random
512-sample windows of it, encodes each window with a 1-D CNN and averages the window
embeddings before the classifier (W, N1, N2, N3, REM).

Training uses a batch-size ramp (small batches early for fast progress, large ones late
for smooth gradients), implemented as a callback like everything else here.
"""
import os
import time
import random
import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset, DataLoader

STAGES = ["W", "N1", "N2", "N3", "REM"]
FS = 40
EPOCH_LEN = 30 * FS
CROP = 512
N_CROPS = 4

config = dict(
    n_train=9600, n_val=2048, epochs=8, batch_size=32, lr=2e-3,
    batch_schedule={0: 32, 3: 64, 5: 128, 7: 256},
    checkpoint_dir="checkpoints", seed=2023,
)


def seed_everything(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


# --------------------------------------------------------------------------- data
def make_recordings(n, seed):
    """Synthetic PSG epochs: each stage has its own dominant rhythm (alpha, theta, spindles, delta...)."""
    rng = np.random.default_rng(seed)
    bands = {0: (10.0, 0.25), 1: (6.0, 0.2), 2: (13.0, 0.15), 3: (1.5, 0.45), 4: (7.0, 0.2)}
    y = rng.choice(5, size=n, p=[0.2, 0.1, 0.4, 0.15, 0.15])
    t = np.arange(EPOCH_LEN) / FS
    x = rng.normal(0, 1.0, size=(n, 2, EPOCH_LEN)).astype(np.float32)
    for k, (f, amp) in bands.items():
        idx = np.where(y == k)[0]
        phase = rng.uniform(0, 2 * np.pi, size=(len(idx), 2, 1))
        freq = f * rng.uniform(0.9, 1.1, size=(len(idx), 1, 1))
        x[idx] += (amp * np.sin(2 * np.pi * freq * t + phase)).astype(np.float32)
    return x, y


class EEGEpochs(Dataset):
    def __init__(self, x, y, n_crops, crop, seed):
        self.x, self.y = torch.from_numpy(x), torch.from_numpy(y).long()
        self.n_crops, self.crop = n_crops, crop
        self.rng = np.random.default_rng(seed)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        starts = self.rng.integers(0, EPOCH_LEN - self.crop, size=self.n_crops)
        crops = torch.stack([self.x[i, :, s:s + self.crop] for s in starts])   # (n_crops, 2, crop)
        return crops, self.y[i]


# ---------------------------------------------------------------------- callbacks
class Callback:
    model = None
    def on_train_begin(self, logs=None): pass
    def on_epoch_begin(self, epoch, logs=None): pass
    def on_batch_end(self, batch, logs=None): pass
    def on_epoch_end(self, epoch, logs=None): pass


class History(Callback):
    def on_train_begin(self, logs=None):
        self.history = {}

    def on_epoch_end(self, epoch, logs=None):
        for k, v in (logs or {}).items():
            self.history.setdefault(k, []).append(v)


class BatchSizeScheduler(Callback):
    def __init__(self, schedule):
        self.schedule = schedule

    def on_epoch_begin(self, epoch, logs=None):
        if epoch in self.schedule and self.schedule[epoch] != self.model.batch_size:
            print(f"BatchSizeScheduler: batch_size {self.model.batch_size} -> {self.schedule[epoch]}")
            self.model.batch_size = self.schedule[epoch]


class ModelCheckpoint(Callback):
    def __init__(self, filepath, monitor="val_loss", save_best_only=True):
        self.filepath, self.monitor, self.save_best_only = filepath, monitor, save_best_only
        self.best = float("inf")

    def on_epoch_end(self, epoch, logs=None):
        cur = logs[self.monitor]
        if not self.save_best_only or cur < self.best:
            path = self.filepath.format(epoch=epoch + 1, **logs)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            torch.save(self.model.state_dict(), path)
            print(f"Epoch {epoch + 1}: {self.monitor} improved from {self.best:.4f} to {cur:.4f}, saving to {path}")
            self.best = cur


class ReduceLROnPlateau(Callback):
    def __init__(self, monitor="val_loss", factor=0.5, patience=1):
        self.monitor, self.factor, self.patience = monitor, factor, patience
        self.best, self.wait = float("inf"), 0

    def on_epoch_end(self, epoch, logs=None):
        if logs[self.monitor] < self.best:
            self.best, self.wait = logs[self.monitor], 0
            return
        self.wait += 1
        if self.wait > self.patience:
            for g in self.model.optimizer.param_groups:
                g["lr"] *= self.factor
            print(f"ReduceLROnPlateau: lr -> {self.model.optimizer.param_groups[0]['lr']:.2e}")
            self.wait = 0


# -------------------------------------------------------------------------- model
class KerasLike(nn.Module):
    """compile() / fit() / evaluate() / predict(), the way we are used to."""

    def compile(self, optimizer, loss, metrics=(), seed=0):
        self.optimizer, self.loss_fn, self.metrics = optimizer, loss, list(metrics)
        self.shuffle_gen = torch.Generator().manual_seed(seed)

    def _loader(self, dataset, shuffle):
        return DataLoader(dataset, batch_size=self.batch_size, shuffle=shuffle,
                          generator=self.shuffle_gen if shuffle else None)

    def fit(self, train_data, epochs, batch_size, validation_data=None, callbacks=()):
        self.batch_size = batch_size
        history = History()
        callbacks = [history, *callbacks]
        for cb in callbacks:
            cb.model = self
            cb.on_train_begin()
        for epoch in range(epochs):
            for cb in callbacks:
                cb.on_epoch_begin(epoch)
            loader = self._loader(train_data, shuffle=True)    # rebuilt: batch size may change
            print(f"Epoch {epoch + 1}/{epochs} (batch_size={self.batch_size}, {len(loader)} steps)")
            self.train()
            t0, tot, correct, n = time.time(), 0.0, 0, 0
            for b, (x, y) in enumerate(loader):
                out = self(x)
                loss = self.loss_fn(out, y)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                tot += loss.item() * len(y); n += len(y)
                correct += (out.argmax(1) == y).sum().item()
                for cb in callbacks:
                    cb.on_batch_end(b, {"loss": loss.item()})
            logs = {"loss": tot / n, "accuracy": correct / n}
            if validation_data is not None:
                logs.update({f"val_{k}": v for k, v in self.evaluate(validation_data).items()})
            print(f"{len(loader)}/{len(loader)} - {time.time() - t0:.0f}s - " +
                  " - ".join(f"{k}: {v:.4f}" for k, v in logs.items()))
            for cb in callbacks:
                cb.on_epoch_end(epoch, logs)
        return history

    @torch.no_grad()
    def evaluate(self, data):
        self.eval()
        tot, correct, n = 0.0, 0, 0
        for x, y in self._loader(data, shuffle=False):
            out = self(x)
            tot += self.loss_fn(out, y).item() * len(y); n += len(y)
            correct += (out.argmax(1) == y).sum().item()
        return {"loss": tot / n, "accuracy": correct / n}

    @torch.no_grad()
    def predict(self, data):
        self.eval()
        return torch.cat([self(x).softmax(-1) for x, _ in self._loader(data, shuffle=False)])


class SleepNet(KerasLike):
    def __init__(self, n_crops=N_CROPS, embed_dim=64, n_classes=5):
        super().__init__()
        self.n_crops, self.embed_dim = n_crops, embed_dim
        self.batch_size = config["batch_size"]
        self.encoder = nn.Sequential(
            nn.Conv1d(2, 32, 7, stride=2, padding=3), nn.BatchNorm1d(32), nn.ReLU(),
            nn.Conv1d(32, 64, 5, stride=2, padding=2), nn.BatchNorm1d(64), nn.ReLU(),
            nn.Conv1d(64, 64, 5, stride=2, padding=2), nn.BatchNorm1d(64), nn.ReLU(),
            nn.Conv1d(64, embed_dim, 3, stride=2, padding=1), nn.BatchNorm1d(embed_dim), nn.ReLU(),
        )
        self.classifier = nn.Sequential(nn.Linear(embed_dim, 64), nn.ReLU(), nn.Dropout(0.3), nn.Linear(64, n_classes))

    def forward(self, x):                                   # x: (batch, n_crops, 2, CROP)
        z = self.encoder(x.flatten(0, 1)).mean(-1)          # (batch * n_crops, embed_dim)
        z = z.view(self.batch_size, self.n_crops, self.embed_dim).mean(1)
        return self.classifier(z)


if __name__ == "__main__":
    torch.set_num_threads(1)
    seed_everything(config["seed"])
    x, y = make_recordings(config["n_train"] + config["n_val"], config["seed"])
    train = EEGEpochs(x[:config["n_train"]], y[:config["n_train"]], N_CROPS, CROP, seed=1)
    val = EEGEpochs(x[config["n_train"]:], y[config["n_train"]:], N_CROPS, CROP, seed=2)
    print("train", len(train), "val", len(val), "class counts", np.bincount(y[:config["n_train"]]).tolist())

    model = SleepNet()
    model.compile(optimizer=torch.optim.Adam(model.parameters(), lr=config["lr"]),
                  loss=nn.CrossEntropyLoss(), metrics=["accuracy"], seed=config["seed"])
    print(model)
    print("trainable params:", sum(p.numel() for p in model.parameters() if p.requires_grad))

    hist = model.fit(train, epochs=config["epochs"], batch_size=config["batch_size"], validation_data=val,
                     callbacks=[BatchSizeScheduler(config["batch_schedule"]),
                                ModelCheckpoint(os.path.join(config["checkpoint_dir"], "sleepnet.{epoch:02d}-{val_loss:.3f}.pt")),
                                ReduceLROnPlateau(patience=1)])

    probs = model.predict(val)
    pred = probs.argmax(1)
    conf = torch.zeros(5, 5, dtype=torch.long)
    for t, p in zip(val.y.tolist(), pred.tolist()):
        conf[t, p] += 1
    print("confusion matrix (rows = true):")
    for name, row in zip(STAGES, conf.tolist()):
        print(f"  {name:>3}: {row}")
    print("final val accuracy", (pred == val.y).float().mean().item())
