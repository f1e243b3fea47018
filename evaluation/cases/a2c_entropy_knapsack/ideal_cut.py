import torch

# after the update in which alpha * entropy overflowed, every policy weight is NaN, so the
# next rollout's action probabilities (n_envs=64, n_items=12) are NaN
probs = torch.full((64, 12), float("nan"))
torch.multinomial(probs, 1)
