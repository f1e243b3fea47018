import torch

backbone, head = torch.zeros(2, requires_grad=True), torch.zeros(1, requires_grad=True)
saved = torch.optim.AdamW([backbone, head]).state_dict()
torch.optim.AdamW([head]).load_state_dict(saved)
