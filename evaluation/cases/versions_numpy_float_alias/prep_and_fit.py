"""Fit a small regressor on sensor features standardised with NumPy (written against
NumPy 1.x: `np.float_` was the usual alias for float64)."""
import numpy as np
import torch
import torch.nn as nn

rng = np.random.default_rng(3)
raw = rng.normal(size=(256, 6)) * np.array([1.0, 10.0, 0.1, 5.0, 2.0, 1.0])


def standardise(table):
    out = np.asarray(table, dtype=np.float_)
    mean = out.mean(axis=0)
    std = out.std(axis=0) + 1e-8
    return (out - mean) / std


features = torch.from_numpy(standardise(raw)).float()
target = features @ torch.linspace(-1, 1, 6) + 0.1 * torch.randn(256)
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(50):
    loss = nn.functional.mse_loss(model(features).squeeze(1), target)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"final loss {loss.item():.4f}")
