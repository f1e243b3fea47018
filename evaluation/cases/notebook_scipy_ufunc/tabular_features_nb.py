#!/usr/bin/env python
# coding: utf-8

# # Tabular regression with rank-gauss features
# Exported from `tabular_features.ipynb`. Synthetic house-price-ish data, a small MLP,
# and a compiled featurizer so preprocessing runs in the same graph as the model.

# In[1]:


import math
import time

import numpy as np
import pandas as pd
import scipy.special
import torch
import torch.nn as nn

torch.manual_seed(42)
np.random.seed(42)
N_ROWS = 2048
USE_COMPILE = True


# In[2]:


rng = np.random.default_rng(0)
df = pd.DataFrame({
    "sqft": rng.lognormal(7.0, 0.4, N_ROWS),
    "rooms": rng.integers(1, 8, N_ROWS),
    "age": rng.exponential(20.0, N_ROWS),
    "dist_center": rng.gamma(2.0, 3.0, N_ROWS),
    "lot": rng.lognormal(8.0, 0.8, N_ROWS),
})
df["price"] = (
    120 * df.sqft ** 0.9 + 8000 * df.rooms - 900 * df.age
    - 4000 * np.log1p(df.dist_center) + rng.normal(0, 20000, N_ROWS)
)
df.describe()


# In[3]:


num_cols = ["sqft", "rooms", "age", "dist_center", "lot"]
train_df = df.sample(frac=0.8, random_state=1)
valid_df = df.drop(train_df.index)
print(len(train_df), len(valid_df))

# per-column quantiles for the rank-gauss transform (computed on train only)
QUANTS = np.linspace(0.0, 1.0, 65)
q_table = torch.tensor(np.stack([np.quantile(train_df[c].values, QUANTS) for c in num_cols]), dtype=torch.float32)
y_mean, y_std = train_df.price.mean(), train_df.price.std()
q_table.shape


# In[4]:


def to_tensors(frame):
    x = torch.tensor(frame[num_cols].values, dtype=torch.float32)
    y = torch.tensor(((frame.price - y_mean) / y_std).values, dtype=torch.float32)
    return x, y

x_train, y_train = to_tensors(train_df)
x_valid, y_valid = to_tensors(valid_df)


# ### Rank-gauss featurizer
# Map each column to its empirical CDF by interpolating the quantile table, then
# through the inverse normal CDF. scipy's `erfinv` is what the Kaggle kernels use.

# In[5]:


def rank_gauss(x, q):
    # x: (B, C), q: (C, K) sorted quantiles
    K = q.shape[1]
    idx = torch.searchsorted(q.contiguous(), x.t().contiguous()).t().clamp(1, K - 1)
    lo = torch.gather(q, 1, (idx - 1).t()).t()
    hi = torch.gather(q, 1, idx.t()).t()
    frac = ((x - lo) / (hi - lo + 1e-9)).clamp(0, 1)
    u = ((idx - 1).float() + frac) / (K - 1)
    u = u.clamp(1e-3, 1 - 1e-3)
    g = scipy.special.erfinv(2 * u.numpy() - 1) * math.sqrt(2)
    return torch.as_tensor(g, dtype=x.dtype)


def featurize(x, q):
    g = rank_gauss(x, q)
    logs = torch.log1p(x.clamp_min(0))
    return torch.cat([g, (logs - logs.mean(0)) / (logs.std(0) + 1e-6)], dim=1)

if USE_COMPILE:
    featurize = torch.compile(featurize, fullgraph=True)


# In[6]:


class MLP(nn.Module):
    def __init__(self, d_in, d_hidden=64):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_in, d_hidden), nn.SiLU(),
            nn.Linear(d_hidden, d_hidden), nn.SiLU(),
            nn.Linear(d_hidden, 1),
        )

    def forward(self, x):
        return self.net(x).squeeze(-1)

model = MLP(2 * len(num_cols))
opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
model


# In[7]:


t0 = time.time()
history = []
for epoch in range(15):
    perm = torch.randperm(len(x_train))
    model.train()
    for i in range(0, len(perm), 128):
        b = perm[i:i + 128]
        feats = featurize(x_train[b], q_table)
        loss = nn.functional.mse_loss(model(feats), y_train[b])
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        v = nn.functional.mse_loss(model(featurize(x_valid, q_table)), y_valid).item()
    history.append(v)
    print(f"epoch {epoch:2d}  valid mse {v:.4f}  ({time.time() - t0:.1f}s)")


# In[8]:


pd.Series(history).plot(title="valid mse") if False else None
print("best epoch", int(np.argmin(history)), "rmse $", round(math.sqrt(min(history)) * y_std))
