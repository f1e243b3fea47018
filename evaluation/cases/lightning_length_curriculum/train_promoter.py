"""Promoter / non-promoter classification of DNA windows with a small transformer.

PyTorch Lightning, plain dataloaders (no DataModule), a length curriculum callback:
training starts on short windows around the TSS and the window grows with global_step.

    python train_promoter.py --max_steps 3000 --batch_size 32
"""
from argparse import ArgumentParser
import math
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import pytorch_lightning as pl
from pytorch_lightning.callbacks import Callback, LearningRateMonitor, ModelCheckpoint
from pytorch_lightning.loggers import CSVLogger
from torch.utils.data import DataLoader, Dataset

VOCAB = {"<pad>": 0, "<cls>": 1, "A": 2, "C": 3, "G": 4, "T": 5, "N": 6}
MOTIFS = ["TATAAA", "GGGCGG", "CCAAT", "TTGACA"]


class SyntheticPromoters(Dataset):
    """Windows centred on a (pseudo) TSS. Positives carry promoter motifs near the centre,
    negatives are GC-matched background. The window length is read at __getitem__ time
    so the curriculum can change it between batches."""

    def __init__(self, n, seq_len, seed):
        self.n, self.seq_len, self.seed = n, seq_len, seed

    def __len__(self):
        return self.n

    def __getitem__(self, idx):
        rng = np.random.default_rng((self.seed, idx, self.seq_len))
        label = int(idx % 2)
        gc = rng.uniform(0.35, 0.65)
        p = [(1 - gc) / 2, gc / 2, gc / 2, (1 - gc) / 2]
        seq = rng.choice(4, size=self.seq_len, p=p) + 2
        if label:
            for m in rng.choice(len(MOTIFS), size=2, replace=False):
                motif = [VOCAB[c] for c in MOTIFS[m]]
                centre = self.seq_len // 2 + int(rng.integers(-(self.seq_len // 4), self.seq_len // 4))
                start = int(np.clip(centre - len(motif), 0, self.seq_len - len(motif)))
                seq[start:start + len(motif)] = motif
        seq[rng.random(self.seq_len) < 0.01] = VOCAB["N"]
        tokens = np.concatenate([[VOCAB["<cls>"]], seq])
        return torch.from_numpy(tokens).long(), torch.tensor(label, dtype=torch.float32)


class PromoterTransformer(pl.LightningModule):
    def __init__(self, d_model=64, n_heads=4, n_layers=2, max_len=96, dropout=0.1,
                 lr=1e-3, weight_decay=0.01, warmup_steps=200, max_steps=3000):
        super().__init__()
        self.save_hyperparameters()
        self.embed = nn.Embedding(len(VOCAB), d_model, padding_idx=0)
        self.stem = nn.Sequential(nn.Conv1d(d_model, d_model, 9, padding=4), nn.GELU())   # k-mer features
        # learned positions; +1 for the <cls> token
        self.pos = nn.Parameter(torch.randn(1, max_len + 1, d_model) * 0.02)
        layer = nn.TransformerEncoderLayer(d_model, n_heads, 4 * d_model, dropout, batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, 1)
        self.val_outputs = []

    def forward(self, tokens):
        T = tokens.size(1)
        h = self.stem(self.embed(tokens).transpose(1, 2)).transpose(1, 2)
        h = h + self.pos[:, :T]
        h = self.encoder(h, src_key_padding_mask=tokens.eq(0))
        return self.head(self.norm(h[:, 0])).squeeze(-1)

    def training_step(self, batch, batch_idx):
        tokens, y = batch
        logits = self(tokens)
        loss = F.binary_cross_entropy_with_logits(logits, y)
        acc = ((logits > 0).float() == y).float().mean()
        self.log_dict({"train/loss": loss, "train/acc": acc, "train/seq_len": float(tokens.size(1) - 1)},
                      on_step=True, on_epoch=False)
        return loss

    def validation_step(self, batch, batch_idx):
        tokens, y = batch
        logits = self(tokens)
        self.val_outputs.append((logits.detach(), y))
        self.log("val/loss", F.binary_cross_entropy_with_logits(logits, y), on_epoch=True, prog_bar=False)

    def on_validation_epoch_end(self):
        logits = torch.cat([o[0] for o in self.val_outputs])
        y = torch.cat([o[1] for o in self.val_outputs])
        self.val_outputs.clear()
        acc = ((logits > 0).float() == y).float().mean()
        # rank-based AUROC (no sklearn on the cluster image)
        order = logits.argsort()
        ranks = torch.empty_like(order, dtype=torch.float32)
        ranks[order] = torch.arange(1, len(order) + 1, dtype=torch.float32)
        n_pos = y.sum()
        n_neg = len(y) - n_pos
        auroc = (ranks[y == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
        self.log_dict({"val/acc": acc, "val/auroc": auroc})
        if not self.trainer.sanity_checking:
            print(f"[step {self.global_step}] val acc {acc:.4f} auroc {auroc:.4f}", flush=True)

    def configure_optimizers(self):
        hp = self.hparams
        decay = [p for n, p in self.named_parameters() if p.ndim >= 2 and "pos" not in n]
        no_decay = [p for n, p in self.named_parameters() if p.ndim < 2 or "pos" in n]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": hp.weight_decay},
                                 {"params": no_decay, "weight_decay": 0.0}], lr=hp.lr)

        def lr_lambda(step):
            if step < hp.warmup_steps:
                return (step + 1) / hp.warmup_steps
            prog = (step - hp.warmup_steps) / max(1, hp.max_steps - hp.warmup_steps)
            return 0.5 * (1 + math.cos(math.pi * min(prog, 1.0)))

        sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


class LengthCurriculum(Callback):
    """Grow the training window at fixed global steps: {step: seq_len}."""

    def __init__(self, dataset, schedule):
        self.dataset, self.schedule = dataset, dict(sorted(schedule.items()))

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        new_len = self.dataset.seq_len
        for step, length in self.schedule.items():
            if trainer.global_step >= step:
                new_len = length
        if new_len != self.dataset.seq_len:
            print(f"[curriculum] global_step {trainer.global_step}: seq_len {self.dataset.seq_len} -> {new_len}",
                  flush=True)
            self.dataset.seq_len = new_len


def parse_args():
    ap = ArgumentParser()
    ap.add_argument("--batch_size", type=int, default=32)
    ap.add_argument("--max_steps", type=int, default=3000)
    ap.add_argument("--val_every", type=int, default=400)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--out_dir", default="lightning_logs")
    # curriculum: start at 32 bp around the TSS, reach the 96 bp assay window, then a last
    # stage on 128 bp windows for extra upstream context
    ap.add_argument("--curriculum", default="0:32,400:48,800:64,1200:96,1600:128")
    ap.add_argument("--max_len", type=int, default=96, help="longest window the model takes (assay: 96 bp)")
    return ap.parse_args()


def main():
    args = parse_args()
    pl.seed_everything(args.seed, workers=True)
    torch.set_num_threads(1)
    schedule = {int(k): int(v) for k, v in (kv.split(":") for kv in args.curriculum.split(","))}

    train_ds = SyntheticPromoters(40_000, seq_len=schedule[0], seed=args.seed)
    val_ds = SyntheticPromoters(1_024, seq_len=96, seed=args.seed + 1)    # assay-length windows
    train_dl = DataLoader(train_ds, batch_size=args.batch_size, shuffle=True,
                          generator=torch.Generator().manual_seed(args.seed))
    val_dl = DataLoader(val_ds, batch_size=256)

    model = PromoterTransformer(max_len=args.max_len, max_steps=args.max_steps)
    trainer = pl.Trainer(
        accelerator="cpu", devices=1, max_steps=args.max_steps,
        val_check_interval=args.val_every, check_val_every_n_epoch=None,
        logger=CSVLogger(args.out_dir, name="promoter"),
        callbacks=[LengthCurriculum(train_ds, schedule),
                   ModelCheckpoint(dirpath=os.path.join(args.out_dir, "ckpt"), monitor="val/auroc", mode="max",
                                   filename="promoter-{step}-{val/auroc:.3f}", auto_insert_metric_name=False),
                   LearningRateMonitor(logging_interval="step")],
        enable_progress_bar=False, log_every_n_steps=50, gradient_clip_val=1.0, deterministic=True,
    )
    trainer.fit(model, train_dataloaders=train_dl, val_dataloaders=val_dl)
    print("best checkpoint:", trainer.checkpoint_callback.best_model_path)


if __name__ == "__main__":
    main()
