#!/usr/bin/env python
# coding: utf-8

# # Store demand model (v3)
# 
# Next-day unit sales per store/item from calendar + recent-history features.
# Exported from `demand_forecast_v3.ipynb` so it can run on the batch box.

# In[1]:


import numpy as np
import pandas as pd
import torch
import torch.nn as nn
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
# %matplotlib inline

try:
    display
except NameError:  # running as a plain script
    display = print

torch.manual_seed(0)
np.random.seed(0)
pd.set_option("display.width", 120)


# In[2]:


N_STORES = 6
N_ITEMS = 8
N_DAYS = 120
VAL_DAYS = 14
ROLL = 7


# ## Load data
# (synthetic stand-in for the warehouse extract)

# In[3]:


rng = np.random.default_rng(42)
dates = pd.date_range("2023-01-01", periods=N_DAYS, freq="D")
rows = []
for s in range(N_STORES):
    store_level = rng.uniform(5, 20)
    for it in range(N_ITEMS):
        item_level = rng.uniform(0.5, 2.0)
        weekly = 1 + 0.3 * np.sin(2 * np.pi * np.arange(N_DAYS) / 7 + rng.uniform(0, 6))
        units = rng.poisson(store_level * item_level * weekly)
        for d, u in zip(dates, units):
            rows.append((s, it, d, int(u)))
df = pd.DataFrame(rows, columns=["store", "item", "date", "units"])
df.head()


# In[4]:


display(df.describe())
print(df.shape)
df.groupby("store").units.mean()


# In[5]:


fig, ax = plt.subplots(figsize=(10, 3))
for s in range(3):
    df[(df.store == s) & (df.item == 0)].plot(x="date", y="units", ax=ax, label=f"store {s}")
fig.savefig("units_preview.png")
plt.close(fig)


# ## Features

# In[6]:


def calendar_feats(frame):
    out = pd.DataFrame(index=frame.index)
    out["dow_sin"] = np.sin(2 * np.pi * frame.date.dt.dayofweek / 7)
    out["dow_cos"] = np.cos(2 * np.pi * frame.date.dt.dayofweek / 7)
    out["month"] = (frame.date.dt.month - 6.5) / 3.5
    out["is_weekend"] = (frame.date.dt.dayofweek >= 5).astype(float)
    return out


def history_feats(frame):
    g = frame.sort_values("date").groupby(["store", "item"]).units
    out = pd.DataFrame(index=frame.index)
    out["lag1"] = g.shift(1)
    out["roll_mean"] = g.transform(lambda x: x.shift(1).rolling(ROLL).mean())
    out["roll_std"] = g.transform(lambda x: x.shift(1).rolling(ROLL).std())
    return out


# In[7]:


df = df.sort_values(["store", "item", "date"]).reset_index(drop=True)
cutoff = dates[-VAL_DAYS]
train_df = df[df.date < cutoff].copy()
val_df = df[df.date >= cutoff - pd.Timedelta(days=ROLL + 1)].copy()  # keep enough history for the rolling window
print(len(train_df), len(val_df))


# In[8]:


hist_tr = history_feats(train_df).fillna(0.0)
scale = train_df.units.mean()
X_cal_tr = torch.tensor(calendar_feats(train_df).values, dtype=torch.float32)
X_hist_tr = torch.tensor(hist_tr.values / scale, dtype=torch.float32)
store_tr = torch.tensor(train_df.store.values)
item_tr = torch.tensor(train_df.item.values)
y_tr = torch.tensor(train_df.units.values / scale, dtype=torch.float32)
X_cal_tr.shape, X_hist_tr.shape


# In[9]:


# validation: drop the warm-up rows instead of zero-filling them
hist_va = history_feats(val_df).dropna()
val_df = val_df[val_df.date >= cutoff]
X_cal_va = torch.tensor(calendar_feats(val_df).values, dtype=torch.float32)
X_hist_va = torch.tensor(hist_va.values / scale, dtype=torch.float32)
store_va = torch.tensor(val_df.store.values)
item_va = torch.tensor(val_df.item.values)
y_va = torch.tensor(val_df.units.values / scale, dtype=torch.float32)
print(X_cal_va.shape, X_hist_va.shape, y_va.shape)


# ## Model

# In[10]:


class DemandNet(nn.Module):
    def __init__(self, n_stores, n_items, n_cal, n_hist, emb=4, hidden=32):
        super().__init__()
        self.store_emb = nn.Embedding(n_stores, emb)
        self.item_emb = nn.Embedding(n_items, emb)
        self.mlp = nn.Sequential(
            nn.Linear(2 * emb + n_cal + n_hist, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, 1),
        )

    def forward(self, store, item, x_cal, x_hist):
        h = torch.cat([self.store_emb(store), self.item_emb(item), x_cal, x_hist], dim=1)
        return self.mlp(h).squeeze(-1)


model = DemandNet(N_STORES, N_ITEMS, X_cal_tr.shape[1], X_hist_tr.shape[1])
model


# In[11]:


opt = torch.optim.Adam(model.parameters(), lr=3e-3)
loss_fn = nn.MSELoss()
BATCH = 256
EPOCHS = 15
losses = []
n = len(y_tr)
for epoch in range(EPOCHS):
    perm = torch.randperm(n)
    ep_loss = 0.0
    for i in range(0, n, BATCH):
        idx = perm[i:i + BATCH]
        pred = model(store_tr[idx], item_tr[idx], X_cal_tr[idx], X_hist_tr[idx])
        loss = loss_fn(pred, y_tr[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        ep_loss += loss.item() * len(idx)
    losses.append(ep_loss / n)
    if epoch % 5 == 0 or epoch == EPOCHS - 1:
        print(f"epoch {epoch:2d}  mse {losses[-1]:.4f}")


# In[12]:


plt.figure(figsize=(5, 3))
plt.plot(losses)
plt.yscale("log")
plt.title("train mse")
plt.savefig("train_curve.png")
plt.close()


# ## Validation

# In[13]:


model.eval()
with torch.no_grad():
    pred_va = model(store_va, item_va, X_cal_va, X_hist_va)
mae = (pred_va - y_va).abs().mean().item() * scale
print(f"val MAE: {mae:.2f} units")


# In[14]:


val_df["pred"] = pred_va.numpy() * scale
display(val_df.groupby("store")[["units", "pred"]].mean())
torch.save(model.state_dict(), "demand_v3.pt")
