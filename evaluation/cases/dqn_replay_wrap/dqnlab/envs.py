"""Batched CartPole-v1 dynamics in torch (same constants as gym's classic-control version)."""
import math

import torch


class VecCartPole:
    gravity, masscart, masspole, length = 9.8, 1.0, 0.1, 0.5
    force_mag, tau = 10.0, 0.02
    theta_limit = 12 * 2 * math.pi / 360
    x_limit = 2.4
    obs_dim, n_actions = 4, 2

    def __init__(self, n_envs, seed=0, max_steps=500):
        self.n = n_envs
        self.max_steps = max_steps
        self.gen = torch.Generator().manual_seed(seed)
        self.state = torch.zeros(n_envs, 4)
        self.t = torch.zeros(n_envs, dtype=torch.long)
        self.episode_return = torch.zeros(n_envs)

    def _sample_init(self, k):
        return torch.rand(k, 4, generator=self.gen) * 0.1 - 0.05

    def reset(self):
        self.state = self._sample_init(self.n)
        self.t.zero_()
        self.episode_return.zero_()
        return self.state.clone()

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state.unbind(1)
        force = torch.where(action == 1, self.force_mag, -self.force_mag)
        cos, sin = torch.cos(theta), torch.sin(theta)
        total_mass = self.masscart + self.masspole
        pml = self.masspole * self.length
        temp = (force + pml * theta_dot ** 2 * sin) / total_mass
        theta_acc = (self.gravity * sin - cos * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * cos ** 2 / total_mass))
        x_acc = temp - pml * theta_acc * cos / total_mass
        x = x + self.tau * x_dot
        x_dot = x_dot + self.tau * x_acc
        theta = theta + self.tau * theta_dot
        theta_dot = theta_dot + self.tau * theta_acc
        self.state = torch.stack([x, x_dot, theta, theta_dot], 1)
        self.t += 1
        terminated = (x.abs() > self.x_limit) | (theta.abs() > self.theta_limit)
        truncated = self.t >= self.max_steps
        reward = torch.ones(self.n)
        self.episode_return += reward
        next_obs = self.state.clone()                    # true next state (for the buffer)
        done = terminated | truncated
        finished = self.episode_return[done].clone()
        if done.any():                                   # auto-reset finished envs
            self.state[done] = self._sample_init(int(done.sum()))
            self.t[done] = 0
            self.episode_return[done] = 0.0
        return self.state.clone(), reward, terminated, truncated, next_obs, finished
