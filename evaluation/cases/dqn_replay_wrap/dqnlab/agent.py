"""Double DQN agent with a hard-updated target network."""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F


class QNetwork(nn.Module):
    def __init__(self, obs_dim, n_actions, hidden=(256, 256)):
        super().__init__()
        layers, d = [], obs_dim
        for h in hidden:
            layers += [nn.Linear(d, h), nn.ReLU()]
            d = h
        layers.append(nn.Linear(d, n_actions))
        self.net = nn.Sequential(*layers)

    def forward(self, obs):
        return self.net(obs)


class DQNAgent:
    def __init__(self, obs_dim, n_actions, cfg, seed=0):
        self.cfg = cfg
        self.n_actions = n_actions
        self.q = QNetwork(obs_dim, n_actions, tuple(cfg["hidden"]))
        self.target = copy.deepcopy(self.q).requires_grad_(False)
        self.opt = torch.optim.Adam(self.q.parameters(), lr=cfg["lr"])
        self.gen = torch.Generator().manual_seed(seed)
        self.updates = 0

    def epsilon(self, step):
        frac = min(1.0, step / self.cfg["eps_decay_steps"])
        return self.cfg["eps_start"] + frac * (self.cfg["eps_end"] - self.cfg["eps_start"])

    @torch.no_grad()
    def act(self, obs, step=None, greedy=False):
        a = self.q(obs).argmax(1)
        if greedy:
            return a
        explore = torch.rand(obs.shape[0], generator=self.gen) < self.epsilon(step)
        rand_a = torch.randint(self.n_actions, (obs.shape[0],), generator=self.gen)
        return torch.where(explore, rand_a, a)

    def update(self, batch):
        obs, act, rew, next_obs, done = batch
        q = self.q(obs).gather(1, act[:, None]).squeeze(1)
        with torch.no_grad():
            next_a = self.q(next_obs).argmax(1, keepdim=True)          # double DQN
            next_q = self.target(next_obs).gather(1, next_a).squeeze(1)
            target = rew + self.cfg["gamma"] * (1.0 - done) * next_q
        loss = F.smooth_l1_loss(q, target)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = nn.utils.clip_grad_norm_(self.q.parameters(), self.cfg["max_grad_norm"])
        self.opt.step()
        self.updates += 1
        if self.updates % self.cfg["target_update_every"] == 0:
            self.target.load_state_dict(self.q.state_dict())
        return loss.item(), float(gnorm), q.mean().item()

    def save(self, path, **extra):
        torch.save({"q": self.q.state_dict(), "target": self.target.state_dict(),
                    "opt": self.opt.state_dict(), "updates": self.updates, **extra}, path)
