#!/usr/bin/env python
# coding: utf-8

# # Activity recognition from accelerometer windows: 1D CNN
# Synthetic stand-in for the lab's wrist-sensor data (3 axes, 50 Hz, 2.56 s windows).

# In[1]:


import os
os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.abspath("inductor_cache")  # home quota on the cluster

import time
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(42)
torch.set_num_threads(1)
rng = np.random.default_rng(42)
ACTIVITIES = ["walk", "run", "sit", "stairs"]
WIN, BATCH = 128, 32


# In[2]:


def make_windows(n_per_class):
    t = np.arange(WIN) / 50.0
    xs, ys = [], []
    for c, (freq, amp) in enumerate([(1.8, 1.0), (2.8, 2.2), (0.0, 0.05), (1.2, 1.4)]):
        phase = rng.uniform(0, 2 * np.pi, (n_per_class, 3, 1))
        sig = amp * np.sin(2 * np.pi * freq * t + phase) + rng.normal(0, 0.3, (n_per_class, 3, WIN))
        sig[:, 2] += 9.81 + rng.normal(0, 0.5, (n_per_class, 1))  # gravity on z
        xs.append(sig); ys.append(np.full(n_per_class, c))
    return torch.tensor(np.concatenate(xs), dtype=torch.float32), torch.tensor(np.concatenate(ys))

X_train, y_train = make_windows(400)
X_test, y_test = make_windows(150)
X_train.shape, X_test.shape, torch.bincount(y_train)


# In[3]:


print("per-axis mean", X_train.mean((0, 2)), "std", X_train.std((0, 2)))


# In[4]:


class HarCNN(nn.Module):
    def __init__(self, n_classes=4):
        super().__init__()
        self.conv1 = nn.Conv1d(3, 32, 7, padding=3)
        self.conv2 = nn.Conv1d(32, 64, 5, padding=2)
        self.conv3 = nn.Conv1d(64, 64, 3, padding=1)
        self.fc = nn.Linear(64, n_classes)

    @staticmethod
    def standardize(x):
        # each window on its own (sensors drift between sessions)
        return torch.stack([(w - w.mean(1, keepdim=True)) / (w.std(1, keepdim=True) + 1e-5) for w in x])

    def forward(self, x):
        x = self.standardize(x)
        x = F.max_pool1d(F.relu(self.conv1(x)), 2)
        x = F.max_pool1d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.conv3(x)).mean(-1)
        return self.fc(x)

model = HarCNN()
sum(p.numel() for p in model.parameters())


# In[5]:


opt = torch.optim.Adam(model.parameters(), lr=2e-3)
for epoch in range(3):
    perm = torch.randperm(len(X_train))
    tot = 0.0
    for i in range(0, len(perm), BATCH):
        idx = perm[i:i + BATCH]
        loss = F.cross_entropy(model(X_train[idx]), y_train[idx])
        opt.zero_grad(); loss.backward(); opt.step()
        tot += loss.item() * len(idx)
    print(f"epoch {epoch}  loss {tot / len(perm):.4f}")


# ## Fast inference over the test set
# Compile once; the test set does not divide by the batch size, so mark the batch dim dynamic
# to avoid a second compile for the last batch.

# In[6]:


model.eval()
fast_model = torch.compile(model)
preds = []
t0 = time.time()
with torch.no_grad():
    for i in range(0, len(X_test), BATCH):
        xb = X_test[i:i + BATCH]
        torch._dynamo.mark_dynamic(xb, 0)
        preds.append(fast_model(xb).argmax(-1))
preds = torch.cat(preds)
print(f"inference: {time.time() - t0:.2f}s")


# In[7]:


acc = (preds == y_test).float().mean().item()
cm = torch.zeros(4, 4, dtype=torch.long)
cm.index_put_((y_test, preds), torch.ones_like(preds), accumulate=True)
print(f"test accuracy {acc:.3f}")
print(cm)
