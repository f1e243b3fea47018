#!/usr/bin/env python
# coding: utf-8


# In[1]:


import os
import torch
import torch.nn as nn

torch.manual_seed(3)
os.makedirs("checkpoints", exist_ok=True)


model = nn.Module()
model.backbone = nn.Sequential(
    nn.Linear(1, 1),
)
model.head = nn.Linear(1, 1)
opt = torch.optim.AdamW(model.parameters())
torch.save({"optimizer": opt.state_dict()}, "checkpoints/best.pt")


# In[6]:


ckpt = torch.load("checkpoints/best.pt")

p = next(iter(model.backbone))
p.requires_grad_(False)
ft_opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad])
ft_opt.load_state_dict(ckpt["optimizer"])
