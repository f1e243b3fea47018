"""Uniform experience replay backed by preallocated tensors."""
import torch


class ReplayBuffer:
    def __init__(self, capacity, obs_dim, seed=0):
        self.capacity = capacity
        self.obs = torch.zeros(capacity, obs_dim)
        self.next_obs = torch.zeros(capacity, obs_dim)
        self.actions = torch.zeros(capacity, dtype=torch.long)
        self.rewards = torch.zeros(capacity)
        self.dones = torch.zeros(capacity)
        self.ptr = 0
        self.size = 0
        self.gen = torch.Generator().manual_seed(seed)

    def __len__(self):
        return self.size

    def add_batch(self, obs, actions, rewards, next_obs, dones):
        """Insert one transition per environment (vectorised envs add n at a time)."""
        n = obs.shape[0]
        sl = slice(self.ptr, self.ptr + n)
        self.obs[sl] = obs
        self.next_obs[sl] = next_obs
        self.actions[sl] = actions
        self.rewards[sl] = rewards
        self.dones[sl] = dones.float()
        self.ptr = (self.ptr + n) % self.capacity
        self.size = min(self.size + n, self.capacity)

    def sample(self, batch_size):
        idx = torch.randint(self.size, (batch_size,), generator=self.gen)
        return (self.obs[idx], self.actions[idx], self.rewards[idx], self.next_obs[idx],
                self.dones[idx])

    def state_dict(self):
        return {"ptr": self.ptr, "size": self.size}
