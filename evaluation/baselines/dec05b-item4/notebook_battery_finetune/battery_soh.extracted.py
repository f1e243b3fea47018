import torch

optimizer = torch.optim.AdamW([torch.zeros(s) for s in [(16, 48), (16,), (1, 16), (1,)]], weight_decay=0.0001)
optimizer.load_state_dict(torch.load('battery_soh.extracted.pt'))
