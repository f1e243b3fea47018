#!/usr/bin/env python
# coding: utf-8

# # Battery state-of-health regression
#
# Predict a cell's state of health (capacity relative to new) from summary features of
# its last charge/discharge cycles. The lab data are not public, so this notebook
# simulates cells with a plausible degradation model.
#
# Plan: train a small MLP with early stopping on validation MAE (best checkpoint saved to
# `checkpoints/best.pt`), then fine-tune only the head on the new chemistry batch.

# In[1]:


import json
import os

import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(3)
np.random.seed(3)
os.makedirs("checkpoints", exist_ok=True)


# ## Simulated cells

# In[2]:


def simulate_cells(n_cells, chemistry_shift=0.0, rng=np.random):
    cycles = rng.randint(50, 1500, size=n_cells)
    temp = rng.normal(28 + 6 * chemistry_shift, 4, size=n_cells)
    c_rate = rng.uniform(0.5, 2.0, size=n_cells)
    fade = 1e-4 * cycles * (1 + 0.03 * (temp - 25)) * c_rate ** 0.7
    soh = np.clip(1.0 - fade + rng.normal(0, 0.01, size=n_cells), 0.55, 1.0)
    ir = 0.02 + 0.05 * (1 - soh) + rng.normal(0, 0.002, size=n_cells)   # internal resistance
    v_sag = 0.1 + 0.4 * (1 - soh) * c_rate + rng.normal(0, 0.01, size=n_cells)
    dq_dv = 3.0 * soh + rng.normal(0, 0.05, size=n_cells)
    feats = np.stack([cycles / 1000, (temp - 25) / 10, c_rate, ir * 10, v_sag, dq_dv], axis=1)
    return feats.astype(np.float32), soh.astype(np.float32)


X, y = simulate_cells(1200)
X_new, y_new = simulate_cells(160, chemistry_shift=1.0)
print(X.shape, y.mean(), X_new.shape, y_new.mean())


# In[3]:


idx = np.random.permutation(len(X))
tr, va = idx[:960], idx[960:]
mu, sd = X[tr].mean(0), X[tr].std(0)
norm = lambda a: torch.from_numpy((a - mu) / sd)
Xtr, ytr = norm(X[tr]), torch.from_numpy(y[tr])
Xva, yva = norm(X[va]), torch.from_numpy(y[va])
Xnew, ynew = norm(X_new), torch.from_numpy(y_new)


# ## Model

# In[4]:


class SoHNet(nn.Module):
    def __init__(self, d_in=6, width=48):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Linear(d_in, width), nn.ReLU(), nn.BatchNorm1d(width),
            nn.Linear(width, width), nn.ReLU(),
        )
        self.head = nn.Sequential(nn.Linear(width, 16), nn.ReLU(), nn.Linear(16, 1), nn.Sigmoid())

    def forward(self, x):
        return self.head(self.backbone(x)).squeeze(-1)


model = SoHNet()
opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
loss_fn = nn.SmoothL1Loss(beta=0.02)


# ## Training with early stopping

# In[5]:


def mae(m, X_, y_):
    m.eval()
    with torch.no_grad():
        return (m(X_) - y_).abs().mean().item()


best, patience, bad = float("inf"), 5, 0
history = []
for epoch in range(40):
    model.train()
    perm = torch.randperm(len(Xtr))
    for i in range(0, len(perm), 64):
        b = perm[i:i + 64]
        opt.zero_grad()
        loss = loss_fn(model(Xtr[b]), ytr[b])
        loss.backward()
        opt.step()
    val_mae = mae(model, Xva, yva)
    history.append({"epoch": epoch, "val_mae": val_mae})
    if val_mae < best - 1e-4:
        best, bad = val_mae, 0
        torch.save({"epoch": epoch, "model": model.state_dict(), "optimizer": opt.state_dict(),
                    "val_mae": val_mae}, "checkpoints/best.pt")
    else:
        bad += 1
        if bad >= patience:
            print(f"early stop at epoch {epoch}")
            break
print(f"best val MAE {best:.4f}")
with open("checkpoints/history.json", "w") as f:
    json.dump(history, f)


# ## Fine-tune the head on the new chemistry
#
# Start from the best checkpoint (weights *and* optimizer moments, so the head keeps
# its Adam statistics), freeze the backbone and train only the head on the new cells.

# In[6]:


ckpt = torch.load("checkpoints/best.pt")
model.load_state_dict(ckpt["model"])
print("zero-shot MAE on new chemistry:", round(mae(model, Xnew, ynew), 4))

for p in model.backbone.parameters():
    p.requires_grad_(False)
ft_opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3, weight_decay=1e-4)
ft_opt.load_state_dict(ckpt["optimizer"])


# In[7]:


ft_split = 96
for epoch in range(30):
    model.train()
    model.backbone.eval()  # keep BatchNorm statistics of the base training
    ft_opt.zero_grad()
    loss = loss_fn(model(Xnew[:ft_split]), ynew[:ft_split])
    loss.backward()
    ft_opt.step()
print("fine-tuned MAE on held-out new cells:", round(mae(model, Xnew[ft_split:], ynew[ft_split:]), 4))
