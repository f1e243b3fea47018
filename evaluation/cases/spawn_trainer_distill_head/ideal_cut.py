import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(4, 2)
        self.head_dist = nn.Linear(4, 2)  # built (distill_token=True), never used (distill=False)

    def forward(self, x):
        return self.head(x)


dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29571", rank=0, world_size=1)
model = DDP(Net(), find_unused_parameters=False)
for _ in range(2):
    model(torch.randn(3, 4)).sum().backward()
