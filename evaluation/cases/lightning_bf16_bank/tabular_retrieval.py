"""Tabular two-tower retrieval model trained with PyTorch Lightning in bf16 mixed precision.

Users and items come from pandas frames; at validation time the item tower embeds the
whole catalogue into a bank and recall@k is measured against it.
"""
import argparse
import logging
import os

import numpy as np
import pandas as pd
import pytorch_lightning as pl
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

logging.getLogger("pytorch_lightning").setLevel(logging.WARNING)
logging.getLogger("lightning").setLevel(logging.WARNING)
log = logging.getLogger("retrieval")

CATEGORIES = ["books", "music", "garden", "toys", "sports", "food", "tools", "games"]


def build_frames(n_users, n_items, n_inter, seed):
    rng = np.random.default_rng(seed)
    items = pd.DataFrame({
        "item_id": np.arange(n_items),
        "category": rng.choice(CATEGORIES, size=n_items),
        "price": rng.lognormal(3.0, 0.7, size=n_items).round(2),
        "rating": rng.uniform(1, 5, size=n_items).round(1),
    })
    users = pd.DataFrame({
        "user_id": np.arange(n_users),
        "age": rng.integers(16, 80, size=n_users),
        "fav": rng.choice(CATEGORIES, size=n_users),
        "spend": rng.lognormal(4.0, 1.0, size=n_users).round(2),
    })
    # interactions biased toward the favourite category
    u = rng.integers(0, n_users, size=n_inter)
    fav_items = {c: items.index[items.category == c].to_numpy() for c in CATEGORIES}
    pick_fav = rng.random(n_inter) < 0.7
    it = np.where(pick_fav,
                  [rng.choice(fav_items[users.fav[x]]) for x in u],
                  rng.integers(0, n_items, size=n_inter))
    inter = pd.DataFrame({"user_id": u, "item_id": it}).drop_duplicates().reset_index(drop=True)
    return users, items, inter


def encode_users(users):
    cat = pd.Categorical(users.fav, categories=CATEGORIES).codes
    num = np.stack([(users.age - 45) / 20, np.log1p(users.spend) / 5], axis=1)
    return torch.tensor(cat, dtype=torch.long), torch.tensor(num, dtype=torch.float32)


def encode_items(items):
    cat = pd.Categorical(items.category, categories=CATEGORIES).codes
    num = np.stack([np.log1p(items.price) / 5, (items.rating - 3) / 2], axis=1)
    return torch.tensor(cat, dtype=torch.long), torch.tensor(num, dtype=torch.float32)


class InteractionDataset(Dataset):
    def __init__(self, inter):
        self.u = torch.tensor(inter.user_id.to_numpy(), dtype=torch.long)
        self.i = torch.tensor(inter.item_id.to_numpy(), dtype=torch.long)

    def __len__(self):
        return len(self.u)

    def __getitem__(self, k):
        return self.u[k], self.i[k]


class Tower(nn.Module):
    def __init__(self, n_cat, n_num, dim):
        super().__init__()
        self.cat = nn.Embedding(n_cat, 16)
        self.mlp = nn.Sequential(nn.Linear(16 + n_num, 64), nn.ReLU(), nn.Linear(64, dim))

    def forward(self, cat, num):
        return F.normalize(self.mlp(torch.cat([self.cat(cat), num], dim=-1)), dim=-1)


class TwoTower(pl.LightningModule):
    def __init__(self, user_feats, item_feats, dim=32, lr=2e-3, temperature=0.1, k=10):
        super().__init__()
        self.save_hyperparameters(ignore=["user_feats", "item_feats"])
        self.register_buffer("u_cat", user_feats[0])
        self.register_buffer("u_num", user_feats[1])
        self.register_buffer("i_cat", item_feats[0])
        self.register_buffer("i_num", item_feats[1])
        self.user_tower = Tower(len(CATEGORIES), 2, dim)
        self.item_tower = Tower(len(CATEGORIES), 2, dim)
        self.n_items = len(item_feats[0])

    def embed_users(self, idx):
        return self.user_tower(self.u_cat[idx], self.u_num[idx])

    def embed_items(self, idx):
        return self.item_tower(self.i_cat[idx], self.i_num[idx])

    def training_step(self, batch, batch_idx):
        u, i = batch
        logits = self.embed_users(u) @ self.embed_items(i).T / self.hparams.temperature
        loss = F.cross_entropy(logits, torch.arange(len(u), device=self.device))
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def build_bank(self):
        # embed the whole catalogue once per validation run, in chunks
        self.bank = torch.zeros(self.n_items, self.hparams.dim, device=self.device)
        for start in range(0, self.n_items, 256):
            idx = torch.arange(start, min(start + 256, self.n_items), device=self.device)
            self.bank[idx] = self.embed_items(idx)

    def validation_step(self, batch, batch_idx):
        u, i = batch
        if batch_idx == 0:
            self.build_bank()
        scores = self.embed_users(u).float() @ self.bank.T
        topk = scores.topk(self.hparams.k, dim=-1).indices
        recall = (topk == i[:, None]).any(-1).float().mean()
        self.log("val_recall", recall, prog_bar=True)
        return recall

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--users", type=int, default=2000)
    ap.add_argument("--items", type=int, default=1500)
    ap.add_argument("--interactions", type=int, default=20000)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--precision", default="bf16-mixed")
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    pl.seed_everything(args.seed, workers=True)

    users, items, inter = build_frames(args.users, args.items, args.interactions, args.seed)
    log.info("%d users, %d items, %d interactions", len(users), len(items), len(inter))
    val_mask = np.random.default_rng(args.seed).random(len(inter)) < 0.1
    train_ds = InteractionDataset(inter[~val_mask])
    val_ds = InteractionDataset(inter[val_mask])

    model = TwoTower(encode_users(users), encode_items(items))
    trainer = pl.Trainer(max_epochs=args.epochs, accelerator="cpu", devices=1, precision=args.precision,
                         logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         num_sanity_val_steps=0, enable_model_summary=False)
    trainer.fit(model,
                DataLoader(train_ds, batch_size=args.batch, shuffle=True),
                DataLoader(val_ds, batch_size=512))
    trainer.save_checkpoint("two_tower.ckpt")
    log.info("final metrics: %s", {k: float(v) for k, v in trainer.callback_metrics.items()})


if __name__ == "__main__":
    main()
