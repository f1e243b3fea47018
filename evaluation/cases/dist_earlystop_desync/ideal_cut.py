# torchrun --nproc_per_node=2 --standalone ideal_cut.py
# Rank 0 stops training one step early and exits cleanly; rank 1's next DDP backward
# finds its peer gone: RuntimeError: ... Connection closed by peer ...
import torch
import torch.distributed as dist
import torch.nn as nn

dist.init_process_group("gloo")
model = nn.parallel.DistributedDataParallel(nn.Linear(2, 1))
for _ in range(1 if dist.get_rank() == 0 else 2):
    model(torch.ones(1, 2)).sum().backward()
dist.destroy_process_group()
