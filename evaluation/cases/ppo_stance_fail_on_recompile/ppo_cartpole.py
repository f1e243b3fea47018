# PPO on a batched, pure-torch CartPole. Single file, CleanRL-ish.
import argparse
import csv
import math
import os
import time

import torch
import torch.nn as nn
from torch.distributions import Categorical

p = argparse.ArgumentParser()
p.add_argument("--num-envs", type=int, default=16)
p.add_argument("--updates", type=int, default=300)
p.add_argument("--epochs", type=int, default=4)
p.add_argument("--minibatches", type=int, default=4)
p.add_argument("--lr", type=float, default=2.5e-3)
p.add_argument("--gamma", type=float, default=0.99)
p.add_argument("--gae-lambda", type=float, default=0.95)
p.add_argument("--clip", type=float, default=0.2)
p.add_argument("--eval-every", type=int, default=100)
p.add_argument("--backend", default="aot_eager")
p.add_argument("--log", default="ppo_progress.csv")
args = p.parse_args()


def horizon_at(update):  # longer rollouts once the pole stays up for a while
    return 32 if update < 200 else 64


class CartPole:
    g, mc, mp, l, f, tau = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02

    def __init__(self, n, gen):
        self.n, self.gen = n, gen
        self.s = torch.zeros(n, 4)
        self.reset(torch.ones(n, dtype=torch.bool))

    def reset(self, mask):
        self.s[mask] = (torch.rand(int(mask.sum()), 4, generator=self.gen) - 0.5) * 0.1

    def step(self, a):
        x, xd, th, thd = self.s.unbind(1)
        force = (a.float() * 2 - 1) * self.f
        ct, st = torch.cos(th), torch.sin(th)
        tmp = (force + self.mp * self.l * thd ** 2 * st) / (self.mc + self.mp)
        thacc = (self.g * st - ct * tmp) / (self.l * (4 / 3 - self.mp * ct ** 2 / (self.mc + self.mp)))
        xacc = tmp - self.mp * self.l * thacc * ct / (self.mc + self.mp)
        self.s = torch.stack([x + self.tau * xd, xd + self.tau * xacc, th + self.tau * thd, thd + self.tau * thacc], 1)
        done = (self.s[:, 0].abs() > 2.4) | (self.s[:, 2].abs() > 12 * math.pi / 180)
        obs = self.s.clone()
        self.reset(done)
        return obs, torch.ones(self.n), done.float()


class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh())
        self.pi, self.v = nn.Linear(64, 2), nn.Linear(64, 1)

    def forward(self, obs):
        h = self.body(obs)
        return self.pi(h), self.v(h).squeeze(-1)


@torch.no_grad()
def evaluate(policy, seed, max_steps=500):
    """One greedy episode on a fresh single env; returns its length."""
    e = CartPole(1, torch.Generator().manual_seed(seed))
    o = e.s.clone()
    for t in range(max_steps):
        logits, _ = policy(o)
        o, _, d = e.step(logits.argmax(-1))
        if d.item():
            return t + 1
    return max_steps


torch.manual_seed(0)
torch.set_num_threads(1)
gen = torch.Generator().manual_seed(0)
env = CartPole(args.num_envs, gen)
agent = Agent()
net = torch.compile(agent, backend=args.backend)
opt = torch.optim.Adam(agent.parameters(), lr=args.lr, eps=1e-5)
obs = env.s.clone()
ep_ret, ep_len, finished = torch.zeros(args.num_envs), torch.zeros(args.num_envs), []
log = open(args.log, "w", newline="")
writer = csv.writer(log)
writer.writerow(["update", "horizon", "mean_return", "pi_loss", "v_loss", "entropy", "sps"])
t_start = time.time()
for update in range(args.updates):
    T = horizon_at(update)
    buf = {k: [] for k in ("obs", "act", "logp", "val", "rew", "done")}
    with torch.no_grad():
        for t in range(T):
            logits, val = net(obs)
            dist = Categorical(logits=logits)
            act = dist.sample()
            nxt, rew, done = env.step(act)
            for k, v in zip(buf, (obs, act, dist.log_prob(act), val, rew, done)):
                buf[k].append(v)
            ep_ret += rew; ep_len += 1
            finished += ep_ret[done.bool()].tolist()
            ep_ret[done.bool()] = 0; ep_len[done.bool()] = 0
            obs = nxt
        _, last_val = net(obs)
    b = {k: torch.stack(v) for k, v in buf.items()}
    adv, gae = torch.zeros(T, args.num_envs), torch.zeros(args.num_envs)
    for t in reversed(range(T)):
        nv = last_val if t == T - 1 else b["val"][t + 1]
        delta = b["rew"][t] + args.gamma * nv * (1 - b["done"][t]) - b["val"][t]
        gae = delta + args.gamma * args.gae_lambda * (1 - b["done"][t]) * gae
        adv[t] = gae
    ret = adv + b["val"]
    flat = {k: v.reshape(T * args.num_envs, *v.shape[2:]) for k, v in b.items()}
    flat_adv, flat_ret = adv.reshape(-1), ret.reshape(-1)
    mb = T * args.num_envs // args.minibatches
    for _ in range(args.epochs):
        perm = torch.randperm(T * args.num_envs, generator=gen)
        for i in range(0, len(perm), mb):
            idx = perm[i:i + mb]
            logits, v = net(flat["obs"][idx])
            dist = Categorical(logits=logits)
            ratio = (dist.log_prob(flat["act"][idx]) - flat["logp"][idx]).exp()
            a = (flat_adv[idx] - flat_adv[idx].mean()) / (flat_adv[idx].std() + 1e-8)
            pi_loss = -torch.min(ratio * a, ratio.clamp(1 - args.clip, 1 + args.clip) * a).mean()
            v_loss = 0.5 * (v - flat_ret[idx]).pow(2).mean()
            ent = dist.entropy().mean()
            loss = pi_loss + 0.5 * v_loss - 0.01 * ent
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
            opt.step()
    if update == 0:
        # every shape the loop uses has been compiled now; a recompile from here on is a perf bug
        torch.compiler.set_stance("fail_on_recompile")
    mean_ret = sum(finished[-20:]) / max(len(finished[-20:]), 1)
    sps = (update + 1) * T * args.num_envs / (time.time() - t_start)
    writer.writerow([update, T, f"{mean_ret:.1f}", f"{pi_loss.item():.4f}", f"{v_loss.item():.4f}", f"{ent.item():.3f}", int(sps)])
    if (update + 1) % args.eval_every == 0:
        print(f"eval after update {update}: greedy episode length {evaluate(net, seed=update)}")
    if update % 25 == 0:
        print(f"update {update:4d}  T={T}  return {mean_ret:6.1f}  v_loss {v_loss.item():.3f}  sps {sps:.0f}")
log.close()
os.makedirs("checkpoints", exist_ok=True)
torch.save(agent.state_dict(), "checkpoints/ppo_cartpole.pt")
