"""Train a Double DQN on batched CartPole with dqnlab (python train_dqn.py --set lr=3e-4)."""
import argparse
import csv
import json
import logging
import os
import time
from collections import deque

import torch

from dqnlab import DQNAgent, ReplayBuffer, VecCartPole

DEFAULTS = {
    "seed": 3,
    "n_envs": 12,
    "total_env_steps": 1_200_000,     # transitions, summed over envs
    "buffer_size": 200_000,
    "learning_starts": 5_000,
    "batch_size": 256,
    "train_every": 1,                 # vector steps between gradient updates
    "gradient_steps": 1,
    "lr": 2.5e-4,
    "gamma": 0.99,
    "hidden": [256, 256],
    "eps_start": 1.0,
    "eps_end": 0.05,
    "eps_decay_steps": 3_000,         # vector steps
    "target_update_every": 500,       # gradient updates
    "max_grad_norm": 10.0,
    "eval_every": 1_000,              # vector steps
    "eval_envs": 8,
    "log_every": 250,
    "run_dir": "runs/dqn_cartpole",
}

log = logging.getLogger("train_dqn")


def parse_config():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", help="JSON file with overrides")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args()
    cfg = dict(DEFAULTS)
    if args.config:
        with open(args.config) as f:
            cfg.update(json.load(f))
    for kv in args.set:
        k, v = kv.split("=", 1)
        cfg[k] = type(DEFAULTS[k])(json.loads(v)) if k in DEFAULTS else json.loads(v)
    return cfg


@torch.no_grad()
def evaluate(agent, n_envs, seed, max_steps=500):
    env = VecCartPole(n_envs, seed=seed, max_steps=max_steps)
    obs = env.reset()
    returns = torch.zeros(n_envs)
    alive = torch.ones(n_envs, dtype=torch.bool)
    for _ in range(max_steps):
        obs, rew, term, trunc, _, _ = env.step(agent.act(obs, greedy=True))
        returns += rew * alive
        alive &= ~(term | trunc)
        if not alive.any():
            break
    return returns.mean().item(), returns.min().item()


def main():
    cfg = parse_config()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    torch.set_num_threads(1)
    torch.manual_seed(cfg["seed"])
    os.makedirs(cfg["run_dir"], exist_ok=True)
    json.dump(cfg, open(os.path.join(cfg["run_dir"], "config.json"), "w"), indent=2)

    env = VecCartPole(cfg["n_envs"], seed=cfg["seed"])
    buffer = ReplayBuffer(cfg["buffer_size"], VecCartPole.obs_dim, seed=cfg["seed"] + 1)
    agent = DQNAgent(VecCartPole.obs_dim, VecCartPole.n_actions, cfg, seed=cfg["seed"] + 2)

    progress = open(os.path.join(cfg["run_dir"], "progress.csv"), "w", newline="")
    writer = csv.DictWriter(progress, fieldnames=["vec_step", "transitions", "updates", "eps",
                                                  "loss", "q_mean", "grad_norm", "ep_return_100",
                                                  "eval_mean", "eval_min", "sps"])
    writer.writeheader()
    recent = deque(maxlen=100)
    best_eval, stats, t0 = -1.0, (float("nan"),) * 3, time.time()
    obs = env.reset()
    n_vec_steps = cfg["total_env_steps"] // cfg["n_envs"]
    for vec_step in range(1, n_vec_steps + 1):
        action = agent.act(obs, step=vec_step)
        next_obs, reward, term, trunc, real_next, finished = env.step(action)
        buffer.add_batch(obs, action, reward, real_next, term)
        recent.extend(finished.tolist())
        obs = next_obs

        transitions = vec_step * cfg["n_envs"]
        if transitions >= cfg["learning_starts"] and vec_step % cfg["train_every"] == 0:
            for _ in range(cfg["gradient_steps"]):
                stats = agent.update(buffer.sample(cfg["batch_size"]))

        row = None
        if vec_step % cfg["log_every"] == 0:
            row = {"vec_step": vec_step, "transitions": transitions, "updates": agent.updates,
                   "eps": round(agent.epsilon(vec_step), 3), "loss": stats[0],
                   "grad_norm": stats[1], "q_mean": stats[2],
                   "ep_return_100": sum(recent) / max(1, len(recent)),
                   "sps": round(transitions / (time.time() - t0))}
            log.info("step %d (%d transitions, buffer %d) loss %.4f q %.2f return(100) %.1f eps %.3f",
                     vec_step, transitions, len(buffer), stats[0], stats[2],
                     row["ep_return_100"], row["eps"])
        if vec_step % cfg["eval_every"] == 0:
            mean_ret, min_ret = evaluate(agent, cfg["eval_envs"], seed=10_000 + vec_step)
            row = row or {"vec_step": vec_step, "transitions": transitions}
            row.update(eval_mean=mean_ret, eval_min=min_ret)
            log.info("eval @ %d: mean return %.1f (min %.1f)", vec_step, mean_ret, min_ret)
            if mean_ret > best_eval:
                best_eval = mean_ret
                agent.save(os.path.join(cfg["run_dir"], "best.pt"), vec_step=vec_step,
                           eval_mean=mean_ret, buffer=buffer.state_dict())
        if row:
            writer.writerow(row)
            progress.flush()

    agent.save(os.path.join(cfg["run_dir"], "final.pt"), vec_step=n_vec_steps)
    progress.close()
    log.info("finished: best eval return %.1f", best_eval)


if __name__ == "__main__":
    main()
