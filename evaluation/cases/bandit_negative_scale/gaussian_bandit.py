# Continuous-action contextual bandit with a Gaussian policy (REINFORCE + baseline).
#
# Quick experiment script -- everything at module level so it can be poked at in an
# interactive session with `python -i gaussian_bandit.py`.
#
# The environment: a context c ~ N(0, I_8); the reward is
#     r = -||a - W c||^2 + noise
# so the optimal action is linear in the context.  The policy outputs mean and scale;
# the scale is multiplied by an exploration coefficient that is annealed over training.

import collections
import csv
import logging
import os
import time
from typing import NamedTuple

import numpy as np
import torch
import torch.nn as nn
from torch.distributions import Normal, Independent

logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(message)s", datefmt="%H:%M:%S")
log = logging.getLogger("bandit")

CONFIG = dict(
    seed=2024,
    ctx_dim=8,
    act_dim=3,
    hidden=64,
    batch=128,
    steps=1500,
    lr=3e-3,
    reward_noise=0.1,
    explore_start=1.0,
    explore_end=0.05,
    explore_steps=400,
    baseline_momentum=0.95,
    eval_every=100,
    eval_episodes=512,
    log_csv="bandit_log.csv",
    ckpt="bandit_policy.pt",
)


class Transition(NamedTuple):
    context: torch.Tensor
    action: torch.Tensor
    log_prob: torch.Tensor
    reward: torch.Tensor


class EvalResult(NamedTuple):
    step: int
    mean_reward: float
    regret: float
    mean_scale: float


torch.manual_seed(CONFIG["seed"])
np.random.seed(CONFIG["seed"])

# ----- environment ----------------------------------------------------------------------
W_true = torch.randn(CONFIG["act_dim"], CONFIG["ctx_dim"]) * 0.5
env_gen = torch.Generator().manual_seed(CONFIG["seed"] + 1)


# ----- policy --------------------------------------------------------------------------
class GaussianPolicy(nn.Module):
    def __init__(self, ctx_dim, act_dim, hidden):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(ctx_dim, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
        self.mu = nn.Linear(hidden, act_dim)
        self.log_std = nn.Linear(hidden, act_dim)

    def forward(self, ctx, explore):
        h = self.trunk(ctx)
        std = self.log_std(h).clamp(-4.0, 1.0).exp()
        return Independent(Normal(self.mu(h), std * explore, validate_args=True), 1)


policy = GaussianPolicy(CONFIG["ctx_dim"], CONFIG["act_dim"], CONFIG["hidden"])
optimizer = torch.optim.Adam(policy.parameters(), lr=CONFIG["lr"])
baseline = 0.0
history = collections.deque(maxlen=50)
evals = []

slope = (CONFIG["explore_end"] - CONFIG["explore_start"]) / CONFIG["explore_steps"]

csv_file = open(CONFIG["log_csv"], "w", newline="")
writer = csv.writer(csv_file)
writer.writerow(["step", "reward", "baseline", "explore", "loss"])

t_start = time.time()
log.info("training for %d steps, batch %d", CONFIG["steps"], CONFIG["batch"])

for step in range(CONFIG["steps"]):
    # linear exploration schedule
    explore = CONFIG["explore_start"] + slope * step

    ctx = torch.randn(CONFIG["batch"], CONFIG["ctx_dim"], generator=env_gen)
    dist = policy(ctx, explore)
    action = dist.sample()
    target = ctx @ W_true.T
    reward = -((action - target) ** 2).sum(-1) + CONFIG["reward_noise"] * torch.randn(
        CONFIG["batch"], generator=env_gen)
    tr = Transition(ctx, action, dist.log_prob(action), reward)

    advantage = tr.reward - baseline
    loss = -(advantage.detach() * tr.log_prob).mean()
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), 5.0)
    optimizer.step()

    baseline = CONFIG["baseline_momentum"] * baseline + (1 - CONFIG["baseline_momentum"]) * tr.reward.mean().item()
    history.append(tr.reward.mean().item())
    writer.writerow([step, f"{tr.reward.mean().item():.4f}", f"{baseline:.4f}", f"{explore:.4f}", f"{loss.item():.4f}"])

    if step % CONFIG["eval_every"] == 0:
        with torch.no_grad():
            ectx = torch.randn(CONFIG["eval_episodes"], CONFIG["ctx_dim"], generator=env_gen)
            edist = policy(ectx, 1.0)
            greedy = edist.mean
            etarget = ectx @ W_true.T
            er = -((greedy - etarget) ** 2).sum(-1)
            res = EvalResult(step, er.mean().item(), (-er).mean().item(),
                             edist.base_dist.scale.mean().item())
        evals.append(res)
        log.info("step %4d | train reward %.3f (avg50 %.3f) | eval %.3f | scale %.3f | explore %.3f",
                 step, tr.reward.mean().item(), float(np.mean(history)), res.mean_reward,
                 res.mean_scale, explore)
        torch.save({"policy": policy.state_dict(), "step": step, "evals": [e._asdict() for e in evals]},
                   CONFIG["ckpt"])

csv_file.close()
log.info("done in %.1fs; best eval reward %.3f", time.time() - t_start,
         max(e.mean_reward for e in evals))

# ----- final greedy evaluation with per-dimension breakdown ----------------------------
with torch.no_grad():
    fctx = torch.randn(4096, CONFIG["ctx_dim"], generator=env_gen)
    fdist = policy(fctx, CONFIG["explore_end"])
    err = (fdist.mean - fctx @ W_true.T) ** 2
    for d in range(CONFIG["act_dim"]):
        log.info("action dim %d: mse %.4f", d, err[:, d].mean().item())
    log.info("overall mse %.4f", err.sum(-1).mean().item())
