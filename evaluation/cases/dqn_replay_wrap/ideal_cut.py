import torch

# ReplayBuffer.add_batch: 12 envs add 12 transitions per vector step into 200000 slots;
# after 16666 steps ptr = 199992 and the slice [199992:200004] holds only 8 rows
obs_store = torch.zeros(200_000, 4)
obs = torch.zeros(12, 4)
ptr = 16666 * 12
obs_store[ptr:ptr + 12] = obs
