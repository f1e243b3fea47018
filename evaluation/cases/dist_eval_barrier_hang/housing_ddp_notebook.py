#!/usr/bin/env python
# coding: utf-8

# # Housing prices: DDP regression
# Exported from `housing_ddp.ipynb`. Run the export with
# `torchrun --nproc_per_node=2 --standalone housing_ddp_notebook.py`.

# In[1]:


import os
import math
import time
import random

import torch
import torch.nn as nn
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import TensorDataset, DataLoader, DistributedSampler


# In[2]:


SEED = 2024
N_HOUSES = 3000
FEATURES = ["area", "rooms", "age", "dist_center", "floor", "garden", "garage", "school_score"]
BATCH = 64
EPOCHS = 3
LR = 1e-3
CKPT = "housing_ckpt.pt"

random.seed(SEED)
torch.manual_seed(SEED)


# In[3]:


dist.init_process_group("gloo")
rank = dist.get_rank()
world = dist.get_world_size()
print(f"rank {rank}/{world} ready", flush=True)


# ## Data
# Synthetic listings; the price depends non-linearly on area, age and distance.

# In[4]:


g = torch.Generator().manual_seed(SEED)
X = torch.rand(N_HOUSES, len(FEATURES), generator=g)
price = (
    250 * X[:, 0] ** 1.5 + 30 * X[:, 1] - 60 * X[:, 2] - 80 * torch.sqrt(X[:, 3])
    + 10 * X[:, 4] + 15 * X[:, 5] + 12 * X[:, 6] + 40 * X[:, 7] * X[:, 0]
)
price = price + 8 * torch.randn(N_HOUSES, generator=g)
y = ((price - price.mean()) / price.std()).unsqueeze(1)

n_val = 600
train_ds = TensorDataset(X[n_val:], y[n_val:])
val_ds = TensorDataset(X[:n_val], y[:n_val])
train_sampler = DistributedSampler(train_ds, shuffle=True, seed=SEED)
train_dl = DataLoader(train_ds, batch_size=BATCH, sampler=train_sampler)
val_dl = DataLoader(val_ds, batch_size=256)
print(len(train_ds), "train /", len(val_ds), "val", flush=True)


# ## Helpers

# In[5]:


def reduce_mean(value):
    """Average a python float over all ranks (for logging)."""
    t = torch.tensor([float(value)])
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t.item() / world


def rmse(model, loader):
    model.eval()
    se, n = 0.0, 0
    with torch.no_grad():
        for xb, yb in loader:
            se += ((model(xb) - yb) ** 2).sum().item()
            n += yb.numel()
    model.train()
    return reduce_mean(math.sqrt(se / n))


# ## Model

# In[6]:


net = nn.Sequential(
    nn.Linear(len(FEATURES), 128), nn.SiLU(),
    nn.Linear(128, 128), nn.SiLU(),
    nn.Linear(128, 64), nn.SiLU(),
    nn.Linear(64, 1),
)
model = DDP(net)
opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=1e-4)
loss_fn = nn.MSELoss()
history = []


# ## Training

# In[7]:


for epoch in range(EPOCHS):
    t0 = time.time()
    train_sampler.set_epoch(epoch)
    running = 0.0
    for step, (xb, yb) in enumerate(train_dl):
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        running += loss.item()
    train_loss = reduce_mean(running / (step + 1))

    # only rank 0 evaluates and writes the checkpoint; everyone syncs afterwards
    if rank == 0:
        val_rmse = rmse(model.module, val_dl)
        history.append({"epoch": epoch, "train_mse": train_loss, "val_rmse": val_rmse})
        print(f"epoch {epoch}  train mse {train_loss:.4f}  val rmse {val_rmse:.4f}  ({time.time() - t0:.1f}s)", flush=True)
        torch.save({"model": model.module.state_dict(), "epoch": epoch}, CKPT)
    dist.barrier()


# In[8]:


if rank == 0:
    for row in history:
        print(row)
    print("best val rmse:", min(r["val_rmse"] for r in history))


# In[9]:


dist.destroy_process_group()
