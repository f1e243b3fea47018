"""A2C with automatic entropy tuning on a batched, action-masked knapsack environment.

Each episode draws N_ITEMS items (weight, value) and a capacity; at every step the agent
picks one item that is still unpacked and still fits (the others are masked out). The
episode ends when nothing fits any more. Reward = value of the packed item.

The entropy coefficient alpha is learned as in SAC (Haarnoja et al. 2018, discrete
version): alpha is raised while the policy's entropy is below the target entropy and
lowered while it is above.

    python a2c_knapsack.py --updates 20000 --n-envs 64
"""
import argparse
import csv
import math
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

NEG = -1e9  # masked logits


def get_args():
    p = argparse.ArgumentParser()
    p.add_argument("--n-items", type=int, default=12)
    p.add_argument("--n-envs", type=int, default=64)
    p.add_argument("--updates", type=int, default=20000)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--alpha-lr", type=float, default=8e-3)
    p.add_argument("--init-alpha", type=float, default=0.05)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--vf-coef", type=float, default=0.5)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--eval-episodes", type=int, default=1024)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--logdir", default="runs/a2c_knapsack")
    return p.parse_args()


class KnapsackEnv:
    """Batched env in torch. obs = [weights, values, packed, capacity_left, fits] (5 * N + 1)."""

    def __init__(self, n_envs, n_items, generator):
        self.B, self.N, self.g = n_envs, n_items, generator

    def reset(self):
        B, N = self.B, self.N
        self.w = torch.rand(B, N, generator=self.g) * 0.4 + 0.05
        self.v = torch.rand(B, N, generator=self.g) * 0.9 + 0.1
        self.cap = self.w.sum(1) * (torch.rand(B, generator=self.g) * 0.3 + 0.35)
        self.packed = torch.zeros(B, N, dtype=torch.bool)
        self.done = torch.zeros(B, dtype=torch.bool)
        return self.obs()

    def legal(self):
        return ~self.packed & (self.w <= self.cap[:, None]) & ~self.done[:, None]

    def obs(self):
        legal = self.legal()
        ratio = self.v / self.w
        return torch.cat([self.w, self.v, ratio / ratio.max(1, keepdim=True).values, self.packed.float(),
                          legal.float(), self.cap[:, None]], 1)

    def step(self, action):
        idx = torch.arange(self.B)
        active = ~self.done
        reward = torch.where(active, self.v[idx, action], torch.zeros(self.B))
        self.cap = torch.where(active, self.cap - self.w[idx, action], self.cap)
        self.packed[idx[active], action[active]] = True
        self.done = self.done | ~self.legal().any(1)
        return self.obs(), reward, self.done.clone()


class ActorCritic(nn.Module):
    def __init__(self, obs_dim, n_actions, hidden):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(obs_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.pi = nn.Linear(hidden, n_actions)
        self.v = nn.Linear(hidden, 1)

    def forward(self, obs, legal):
        h = self.body(obs)
        logits = self.pi(h).masked_fill(~legal, NEG)
        return logits, self.v(h).squeeze(-1)


def rollout(env, net, greedy=False):
    obs = env.reset()
    logps, ents, vals, rews, alive = [], [], [], [], []
    for _ in range(env.N):
        legal = env.legal()
        if not legal.any():
            break
        logits, value = net(obs, legal)             # finished envs: all masked -> uniform, ignored via `alive`
        logp_all = F.log_softmax(logits, -1)
        probs = logp_all.exp()
        if greedy:
            a = probs.argmax(-1)
        else:
            a = torch.multinomial(probs, 1).squeeze(-1)
        alive.append((~env.done).float())
        logps.append(logp_all.gather(1, a[:, None]).squeeze(1))
        ents.append(-(probs * logp_all).sum(-1))
        vals.append(value)
        obs, r, _ = env.step(a)
        rews.append(r)
    return [torch.stack(x, 1) for x in (logps, ents, vals, rews, alive)]


def discounted(rews, alive, gamma):
    ret = torch.zeros(rews.shape[0])
    out = torch.zeros_like(rews)
    for t in reversed(range(rews.shape[1])):
        ret = rews[:, t] + gamma * ret * alive[:, t]
        out[:, t] = ret
    return out


@torch.no_grad()
def evaluate(net, n_episodes, n_items, seed):
    """Greedy policy on a fixed set of instances: mean packed value per episode."""
    env = KnapsackEnv(n_episodes, n_items, torch.Generator().manual_seed(seed))
    rews = rollout(env, net, greedy=True)[3]
    return rews.sum(1).mean().item()


def heuristic_value(w, v, cap):
    total = torch.zeros(len(cap))
    cap = cap.clone()
    for j in range(w.shape[1]):
        fits = w[:, j] <= cap
        total += torch.where(fits, v[:, j], torch.zeros_like(total))
        cap = torch.where(fits, cap - w[:, j], cap)
    return total.mean().item()


def main():
    args = get_args()
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    torch.set_num_threads(1)
    os.makedirs(args.logdir, exist_ok=True)

    env = KnapsackEnv(args.n_envs, args.n_items, torch.Generator().manual_seed(args.seed))
    obs_dim = 5 * args.n_items + 1
    net = ActorCritic(obs_dim, args.n_items, args.hidden)
    opt = torch.optim.Adam(net.parameters(), lr=args.lr)
    log_alpha = torch.tensor(math.log(args.init_alpha), requires_grad=True)
    alpha_opt = torch.optim.Adam([log_alpha], lr=args.alpha_lr)
    target_entropy = 0.98 * math.log(args.n_items)              # 98% of the uniform policy's entropy
    print(f"obs_dim={obs_dim} actions={args.n_items} params={sum(p.numel() for p in net.parameters())} "
          f"target_entropy={target_entropy:.3f}")

    # reference: value/weight greedy heuristic on the evaluation instances
    ref_env = KnapsackEnv(args.eval_episodes, args.n_items, torch.Generator().manual_seed(999))
    ref_env.reset()
    order = (ref_env.v / ref_env.w).argsort(1, descending=True)
    ref = heuristic_value(ref_env.w.gather(1, order), ref_env.v.gather(1, order), ref_env.cap)
    print(f"greedy value/weight heuristic: {ref:.3f}")

    f = open(os.path.join(args.logdir, "progress.csv"), "w", newline="")
    w = csv.writer(f)
    w.writerow(["update", "ep_return", "entropy", "alpha", "pi_loss", "v_loss", "grad_norm", "eval_return"])
    best, t0 = -1.0, time.time()
    for upd in range(1, args.updates + 1):
        logp, ent, val, rew, alive = rollout(env, net)
        ret = discounted(rew, alive, args.gamma)
        adv = (ret - val).detach()
        n_alive = alive.sum()
        alpha = log_alpha.exp().detach()
        pi_loss = -(logp * adv * alive).sum() / n_alive
        v_loss = ((ret - val) ** 2 * alive).sum() / n_alive
        entropy = (ent * alive).sum() / n_alive
        loss = pi_loss + args.vf_coef * v_loss - alpha * entropy
        opt.zero_grad()
        loss.backward()
        gn = nn.utils.clip_grad_norm_(net.parameters(), args.max_grad_norm)
        opt.step()

        alpha_loss = log_alpha * (entropy.detach() - target_entropy)   # raise alpha if entropy < target
        alpha_opt.zero_grad()
        alpha_loss.backward()
        alpha_opt.step()

        row = [upd, rew.sum(1).mean().item(), entropy.item(), alpha.item(), pi_loss.item(), v_loss.item(),
               gn.item(), ""]
        if upd % args.eval_every == 0:
            er = evaluate(net, args.eval_episodes, args.n_items, seed=999)
            row[-1] = er
            print(f"upd {upd:5d} | return {row[1]:.3f} | eval {er:.3f} (heuristic {ref:.3f}) | "
                  f"entropy {row[2]:.3f} | alpha {row[3]:.3g} | v_loss {row[5]:.4f} | {time.time() - t0:.0f}s",
                  flush=True)
            if er > best:
                best = er
                torch.save({"net": net.state_dict(), "log_alpha": log_alpha.detach(), "update": upd,
                            "eval_return": er, "args": vars(args)}, os.path.join(args.logdir, "best.pt"))
        w.writerow(row)
        if upd % 100 == 0:
            f.flush()
    f.close()
    print(f"done: best eval return {best:.3f} (heuristic {ref:.3f}) in {time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
