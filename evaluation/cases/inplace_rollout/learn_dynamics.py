"""
Learned simulator for a chain of damped spring-masses.

A small MLP predicts d(state)/dt; we integrate it with explicit Euler and train on
multi-step rollouts against the numerically simulated ground truth.

  python learn_dynamics.py --rollout 20 --epochs 30
"""
import argparse
import json
import os
import time

import numpy as np
import torch
import torch.nn as nn


# ---------------------------------------------------------------------------
# Ground truth
# ---------------------------------------------------------------------------

def spring_chain_rhs(state, k, c, m):
    """state = [x1, x2, v1, v2]; two masses, wall-spring-mass-spring-mass."""
    x1, x2, v1, v2 = state.T
    a1 = (-k[0] * x1 + k[1] * (x2 - x1) - c * v1) / m[0]
    a2 = (-k[1] * (x2 - x1) - c * v2) / m[1]
    return np.stack([v1, v2, a1, a2], axis=1)


def simulate(n_traj, n_steps, dt, rng, substeps=10):
    k = np.array([4.0, 2.5])
    m = np.array([1.0, 0.7])
    c = 0.15
    s = np.concatenate([rng.uniform(-1, 1, (n_traj, 2)), rng.uniform(-0.5, 0.5, (n_traj, 2))], axis=1)
    out = np.zeros((n_traj, n_steps + 1, 4), dtype=np.float32)
    out[:, 0] = s
    h = dt / substeps
    for t in range(n_steps):
        for _ in range(substeps):  # RK2 on a finer grid
            k1 = spring_chain_rhs(s, k, c, m)
            k2 = spring_chain_rhs(s + h * k1, k, c, m)
            s = s + 0.5 * h * (k1 + k2)
        out[:, t + 1] = s
    return out


class RolloutWindows(torch.utils.data.Dataset):
    def __init__(self, traj, horizon):
        self.traj = torch.from_numpy(traj)
        self.horizon = horizon
        self.index = [(i, t) for i in range(traj.shape[0]) for t in range(0, traj.shape[1] - horizon, 5)]

    def __len__(self):
        return len(self.index)

    def __getitem__(self, j):
        i, t = self.index[j]
        return self.traj[i, t], self.traj[i, t + 1:t + 1 + self.horizon]


# ---------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------

class Dynamics(nn.Module):
    def __init__(self, dim=4, hidden=64, depth=3):
        super().__init__()
        layers, d = [], dim
        for _ in range(depth):
            layers += [nn.Linear(d, hidden), nn.Tanh()]
            d = hidden
        layers.append(nn.Linear(d, dim))
        self.net = nn.Sequential(*layers)
        # start close to the zero vector field
        nn.init.zeros_(self.net[-1].weight)
        nn.init.zeros_(self.net[-1].bias)

    def forward(self, s):
        return self.net(s)


class EulerSimulator(nn.Module):
    def __init__(self, dynamics, dt):
        super().__init__()
        self.f = dynamics
        self.dt = dt

    def forward(self, s0, n_steps):
        state = s0.clone()
        traj = []
        for _ in range(n_steps):
            state += self.dt * self.f(state)
            traj.append(state.clone())
        return torch.stack(traj, dim=1)


# ---------------------------------------------------------------------------

def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--n-traj", type=int, default=64)
    p.add_argument("--steps", type=int, default=120)
    p.add_argument("--dt", type=float, default=0.05)
    p.add_argument("--rollout", type=int, default=20)
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--bs", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--detect-anomaly", action="store_true")
    p.add_argument("--save", default="checkpoints/dynamics.pt")
    return p.parse_args()


def main():
    a = parse()
    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)
    if a.detect_anomaly:
        torch.autograd.set_detect_anomaly(True)

    t0 = time.time()
    traj = simulate(a.n_traj, a.steps, a.dt, rng)
    n_val = a.n_traj // 8
    train_ds = RolloutWindows(traj[n_val:], a.rollout)
    val_ds = RolloutWindows(traj[:n_val], a.rollout)
    print(f"simulated {a.n_traj} trajectories in {time.time() - t0:.2f}s; "
          f"{len(train_ds)} train / {len(val_ds)} val windows")

    loader = torch.utils.data.DataLoader(train_ds, batch_size=a.bs, shuffle=True,
                                         generator=torch.Generator().manual_seed(a.seed))
    val_loader = torch.utils.data.DataLoader(val_ds, batch_size=512)

    sim = EulerSimulator(Dynamics(), a.dt)
    opt = torch.optim.Adam(sim.parameters(), lr=a.lr)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.5)
    # later steps of the rollout matter less at first
    w = torch.linspace(1.0, 0.3, a.rollout)[None, :, None]

    history = []
    best = float("inf")
    for epoch in range(a.epochs):
        sim.train()
        tr = 0.0
        for s0, target in loader:
            pred = sim(s0, a.rollout)
            loss = ((pred - target) ** 2 * w).mean()
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(sim.parameters(), 5.0)
            opt.step()
            tr += loss.item() * len(s0)
        sched.step()
        tr /= len(train_ds)

        sim.eval()
        with torch.no_grad():
            va = sum(((sim(s0, a.rollout) - tgt) ** 2).mean().item() * len(s0)
                     for s0, tgt in val_loader) / len(val_ds)
        history.append({"epoch": epoch, "train": tr, "val": va})
        if epoch % 5 == 0:
            print(f"epoch {epoch:3d} train {tr:.5f} val {va:.5f}")
        if va < best:
            best = va
            os.makedirs(os.path.dirname(a.save), exist_ok=True)
            torch.save({"state_dict": sim.state_dict(), "args": vars(a)}, a.save)

    with open(os.path.splitext(a.save)[0] + "_history.json", "w") as f:
        json.dump(history, f)
    print(f"best val mse {best:.5f}")


if __name__ == "__main__":
    main()
