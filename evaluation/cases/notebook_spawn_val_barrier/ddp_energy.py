# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.16.1
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Building energy regression, data-parallel on CPU
#
# Two workers with `torch.multiprocessing.spawn`, gloo backend. Run as a script
# (`python ddp_energy.py`): spawned workers cannot pickle functions defined in a
# notebook kernel.

# %%
import os
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

WORLD_SIZE = 2
EPOCHS = 4
BATCH = 32
LR = 2e-3
SEED = 42

# %% [markdown]
# ## Data
# Synthetic stand-in for the building energy set: 8 design features
# (compactness, surface, wall, roof, height, orientation, glazing, glazing distribution),
# heating load as target.

# %%
def make_buildings(n=1536, seed=SEED):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 8)).astype(np.float32)
    w = np.array([3.0, -2.0, 1.5, -1.0, 4.0, 0.1, 2.5, 0.3], dtype=np.float32)
    y = X @ w + 0.5 * np.sin(3 * X[:, 0]) * X[:, 4] + rng.normal(scale=0.3, size=n).astype(np.float32)
    return torch.from_numpy(X), torch.from_numpy(y.astype(np.float32)).unsqueeze(1)


X, y = make_buildings()
n_val = 256
train_ds = TensorDataset(X[n_val:], y[n_val:])
val_ds = TensorDataset(X[:n_val], y[:n_val])
print(len(train_ds), len(val_ds))

# %% [markdown]
# ## Model

# %%
class EnergyNet(nn.Module):
    def __init__(self, d_in=8, hidden=64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(),
                                 nn.Linear(hidden, 1))

    def forward(self, x):
        return self.net(x)

# %% [markdown]
# ## Helpers
# `reduce_mean` averages a scalar over the workers so that every worker logs the
# same loss.

# %%
def setup(rank, world_size):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = "12355"
    dist.init_process_group("gloo", rank=rank, world_size=world_size)


def cleanup():
    dist.destroy_process_group()


def reduce_mean(value):
    t = torch.tensor([float(value)])
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return (t / dist.get_world_size()).item()


def evaluate(model, loader):
    model.eval()
    se, n = 0.0, 0
    with torch.no_grad():
        for xb, yb in loader:
            se += ((model(xb) - yb) ** 2).sum().item()
            n += len(yb)
    model.train()
    return reduce_mean((se / n) ** 0.5)

# %% [markdown]
# ## Training loop (one per worker)

# %%
def train(rank, world_size):
    setup(rank, world_size)
    torch.set_num_threads(1)
    torch.manual_seed(SEED)
    model = DDP(EnergyNet())
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    sampler = DistributedSampler(train_ds, num_replicas=world_size, rank=rank, shuffle=True, seed=SEED)
    loader = DataLoader(train_ds, batch_size=BATCH, sampler=sampler)
    val_loader = DataLoader(val_ds, batch_size=128)
    loss_fn = nn.MSELoss()
    history = []
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        t0 = time.time()
        running = 0.0
        for xb, yb in loader:
            opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            running += loss.item()
        train_loss = reduce_mean(running / len(loader))
        # validation on the main worker only, the others wait for it
        if rank == 0:
            val_rmse = evaluate(model.module, val_loader)
            history.append((epoch, train_loss, val_rmse))
            print(f"epoch {epoch}  train mse {train_loss:.4f}  val rmse {val_rmse:.4f}  ({time.time() - t0:.1f}s)",
                  flush=True)
        dist.barrier()
    if rank == 0:
        torch.save(model.module.state_dict(), "energy_net.pt")
    cleanup()

# %% [markdown]
# ## Launch

# %%
if __name__ == "__main__":
    mp.spawn(train, args=(WORLD_SIZE,), nprocs=WORLD_SIZE, join=True)
