"""Multi-task tabular model: churn classification + an auxiliary "spend" regression.

Only a few customers have a known spend value, so the spend head is trained on the
batches that contain at least one of them.

    torchrun --nproc_per_node=2 --standalone train_multitask.py --epochs 2
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class CustomerTable(Dataset):
    def __init__(self, n_rows, n_features, spend_fraction, seed):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n_rows, n_features, generator=g)
        w = torch.randn(n_features, generator=g)
        self.churn = (self.x @ w > 0.3).long()
        self.spend = (self.x[:, :4].abs().sum(1) * 12.5).float()
        self.has_spend = torch.rand(n_rows, generator=g) < spend_fraction

    def __len__(self):
        return self.x.shape[0]

    def __getitem__(self, i):
        return {"x": self.x[i], "churn": self.churn[i],
                "spend": self.spend[i], "has_spend": self.has_spend[i]}


class ChurnNet(nn.Module):
    def __init__(self, n_features, hidden):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(n_features, hidden), nn.GELU(),
                                      nn.LayerNorm(hidden), nn.Linear(hidden, hidden), nn.GELU())
        self.churn_head = nn.Linear(hidden, 2)
        self.spend_head = nn.Sequential(nn.Linear(hidden, hidden // 2), nn.ReLU(), nn.Linear(hidden // 2, 1))

    def forward(self, x, with_spend=True):
        h = self.backbone(x)
        out = {"churn": self.churn_head(h)}
        if with_spend:
            out["spend"] = self.spend_head(h).squeeze(-1)
        return out


class Callback:
    def on_train_start(self, trainer): pass
    def on_batch_end(self, trainer, step, logs): pass
    def on_epoch_end(self, trainer, epoch, logs): pass


class ConsoleLogger(Callback):
    def __init__(self, every):
        self.every = every

    def on_batch_end(self, trainer, step, logs):
        if trainer.is_main and step % self.every == 0:
            print(f"step {step:4d} " + " ".join(f"{k}={v:.4f}" for k, v in logs.items()), flush=True)

    def on_epoch_end(self, trainer, epoch, logs):
        if trainer.is_main:
            print(f"epoch {epoch} done: {json.dumps(logs)}", flush=True)


class Checkpointer(Callback):
    def __init__(self, out_dir):
        self.out_dir = out_dir

    def on_train_start(self, trainer):
        if trainer.is_main:
            os.makedirs(self.out_dir, exist_ok=True)

    def on_epoch_end(self, trainer, epoch, logs):
        if trainer.is_main:
            torch.save({"model": trainer.model.module.state_dict(),
                        "opt": trainer.optimizer.state_dict(), "epoch": epoch},
                       os.path.join(self.out_dir, f"epoch{epoch}.pt"))


class Trainer:
    def __init__(self, model, dataset, args, callbacks=()):
        self.args = args
        self.rank = dist.get_rank()
        self.is_main = self.rank == 0
        self.model = DDP(model)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=args.lr, weight_decay=0.01)
        self.sampler = DistributedSampler(dataset, shuffle=True, seed=args.seed)
        self.loader = DataLoader(dataset, batch_size=args.batch_size, sampler=self.sampler)
        self.callbacks = list(callbacks)
        self.global_step = 0

    def _emit(self, hook, *a):
        for cb in self.callbacks:
            getattr(cb, hook)(self, *a)

    def compute_loss(self, batch):
        with_spend = bool(batch["has_spend"].any())
        out = self.model(batch["x"], with_spend=with_spend)
        loss = F.cross_entropy(out["churn"], batch["churn"])
        logs = {"churn_loss": loss.item()}
        if with_spend:
            m = batch["has_spend"]
            spend_loss = F.smooth_l1_loss(out["spend"][m], batch["spend"][m])
            loss = loss + self.args.spend_weight * spend_loss
            logs["spend_loss"] = spend_loss.item()
        return loss, logs

    def fit(self):
        self._emit("on_train_start")
        for epoch in range(self.args.epochs):
            self.sampler.set_epoch(epoch)
            self.model.train()
            total, n = 0.0, 0
            for batch in self.loader:
                loss, logs = self.compute_loss(batch)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(self.model.parameters(), self.args.clip)
                self.optimizer.step()
                total += loss.item()
                n += 1
                self._emit("on_batch_end", self.global_step, logs)
                self.global_step += 1
            self._emit("on_epoch_end", epoch, {"loss": total / max(n, 1)})


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=2048)
    p.add_argument("--features", type=int, default=24)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--spend-fraction", type=float, default=0.15)
    p.add_argument("--spend-weight", type=float, default=0.05)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", default="checkpoints")
    p.add_argument("--log-every", type=int, default=5)
    return p.parse_args()


def main():
    args = parse_args()
    dist.init_process_group(backend="gloo")
    torch.manual_seed(args.seed)
    data = CustomerTable(args.rows, args.features, args.spend_fraction, seed=args.seed)
    model = ChurnNet(args.features, args.hidden)
    trainer = Trainer(model, data, args, [ConsoleLogger(args.log_every), Checkpointer(args.out)])
    t0 = time.time()
    trainer.fit()
    if trainer.is_main:
        print(f"training finished in {time.time() - t0:.1f}s", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
