"""Star-rating classifier for product reviews (bag-of-hashed-words + MLP).

Usage:
    python train.py --max-epochs 3 --batch-size 64

Data: reviews are synthesised here so the pipeline can be smoke-tested without the
vendor export; the vendor schema stores the rating as 1..5 stars.
"""
import argparse
import logging
import os
import random
import zlib

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import pytorch_lightning as pl
from pytorch_lightning.callbacks import EarlyStopping, LearningRateMonitor, ModelCheckpoint
from pytorch_lightning.loggers import CSVLogger
from torch.utils.data import DataLoader, Dataset, random_split

log = logging.getLogger("reviews")

POSITIVE = ["great", "love", "excellent", "perfect", "happy", "recommend", "fast", "solid"]
NEGATIVE = ["broken", "refund", "terrible", "slow", "awful", "return", "cheap", "worst"]
FILLER = ["the", "item", "arrived", "box", "it", "was", "and", "very", "product", "this",
          "i", "my", "after", "days", "use", "quality", "price", "would", "again", "not"]

NUM_STARS = 5


def hash_token(tok: str, dim: int) -> int:
    return zlib.crc32(tok.encode()) % dim


def synth_reviews(n: int, seed: int):
    """Make (text, stars) pairs; the star rating follows the vendor export: 1..5."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        stars = rng.randint(1, NUM_STARS)
        n_pos = max(0, stars - 2) + rng.randint(0, 1)
        n_neg = max(0, 4 - stars) + rng.randint(0, 1)
        words = [rng.choice(FILLER) for _ in range(rng.randint(6, 18))]
        words += [rng.choice(POSITIVE) for _ in range(n_pos)]
        words += [rng.choice(NEGATIVE) for _ in range(n_neg)]
        rng.shuffle(words)
        rows.append({"text": " ".join(words), "stars": stars})
    return rows


class ReviewDataset(Dataset):
    def __init__(self, rows, hash_dim):
        self.rows = rows
        self.hash_dim = hash_dim

    def __len__(self):
        return len(self.rows)

    def featurize(self, text):
        vec = np.zeros(self.hash_dim, dtype=np.float32)
        for tok in text.lower().split():
            vec[hash_token(tok, self.hash_dim)] += 1.0
        # sublinear tf
        return np.log1p(vec)

    def __getitem__(self, i):
        row = self.rows[i]
        x = torch.from_numpy(self.featurize(row["text"]))
        y = torch.tensor(row["stars"], dtype=torch.long)
        return x, y


class ReviewsDataModule(pl.LightningDataModule):
    def __init__(self, n_reviews=2000, hash_dim=512, batch_size=64, val_frac=0.15, seed=0):
        super().__init__()
        self.save_hyperparameters()
        self.train_set = self.val_set = self.test_set = None

    def prepare_data(self):
        # The real module downloads the vendor export here.
        pass

    def setup(self, stage=None):
        hp = self.hparams
        rows = synth_reviews(hp.n_reviews, hp.seed)
        full = ReviewDataset(rows, hp.hash_dim)
        n_val = int(len(full) * hp.val_frac)
        n_test = n_val
        n_train = len(full) - n_val - n_test
        gen = torch.Generator().manual_seed(hp.seed)
        self.train_set, self.val_set, self.test_set = random_split(full, [n_train, n_val, n_test], generator=gen)
        log.info("split sizes: train=%d val=%d test=%d", n_train, n_val, n_test)

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.hparams.batch_size, shuffle=True,
                          generator=torch.Generator().manual_seed(self.hparams.seed))

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=256)

    def test_dataloader(self):
        return DataLoader(self.test_set, batch_size=256)


class StarClassifier(pl.LightningModule):
    def __init__(self, hash_dim=512, hidden=128, num_classes=NUM_STARS, lr=3e-3, weight_decay=1e-4,
                 dropout=0.2, label_smoothing=0.05):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(
            nn.Linear(hash_dim, hidden),
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(hidden, hidden // 2),
            nn.GELU(),
            nn.Linear(hidden // 2, num_classes),
        )
        self.criterion = nn.CrossEntropyLoss(label_smoothing=label_smoothing)

    def forward(self, x):
        return self.net(x)

    def _shared_step(self, batch, stage):
        x, y = batch
        logits = self(x)
        loss = self.criterion(logits, y)
        acc = (logits.argmax(dim=-1) == y).float().mean()
        # off-by-one tolerant accuracy (within a star) is what product asked for
        near = ((logits.argmax(dim=-1) - y).abs() <= 1).float().mean()
        self.log(f"{stage}_loss", loss, prog_bar=(stage == "val"), on_epoch=True, on_step=False)
        self.log(f"{stage}_acc", acc, on_epoch=True, on_step=False)
        self.log(f"{stage}_acc_within1", near, on_epoch=True, on_step=False)
        return loss

    def training_step(self, batch, batch_idx):
        return self._shared_step(batch, "train")

    def validation_step(self, batch, batch_idx):
        self._shared_step(batch, "val")

    def test_step(self, batch, batch_idx):
        self._shared_step(batch, "test")

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr, weight_decay=self.hparams.weight_decay)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, self.trainer.max_epochs))
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "epoch"}}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n-reviews", type=int, default=2000)
    p.add_argument("--hash-dim", type=int, default=512)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--max-epochs", type=int, default=3)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--out", default="runs/reviews")
    p.add_argument("--skip-test", action="store_true")
    return p.parse_args()


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    pl.seed_everything(args.seed, workers=True)
    os.makedirs(args.out, exist_ok=True)

    dm = ReviewsDataModule(n_reviews=args.n_reviews, hash_dim=args.hash_dim,
                           batch_size=args.batch_size, seed=args.seed)
    model = StarClassifier(hash_dim=args.hash_dim, hidden=args.hidden, lr=args.lr)

    callbacks = [
        ModelCheckpoint(dirpath=os.path.join(args.out, "ckpt"), monitor="val_loss", mode="min",
                        save_top_k=1, filename="stars-{epoch:02d}-{val_loss:.3f}"),
        EarlyStopping(monitor="val_loss", patience=3, mode="min"),
        LearningRateMonitor(logging_interval="epoch"),
    ]
    trainer = pl.Trainer(
        max_epochs=args.max_epochs,
        accelerator="cpu",
        devices=1,
        logger=CSVLogger(args.out, name="csv"),
        callbacks=callbacks,
        enable_progress_bar=False,
        enable_model_summary=True,
        num_sanity_val_steps=0,
        log_every_n_steps=10,
        deterministic=True,
    )
    trainer.fit(model, datamodule=dm)
    log.info("best checkpoint: %s", callbacks[0].best_model_path)
    if not args.skip_test:
        trainer.test(model, datamodule=dm, ckpt_path="best")


if __name__ == "__main__":
    main()
