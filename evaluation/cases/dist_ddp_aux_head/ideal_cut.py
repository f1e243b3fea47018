# torchrun --nproc_per_node=2 --standalone ideal_cut.py
# A DDP parameter that gets no gradient in one step makes the *next* forward raise.
import torch
import torch.distributed as dist
import torch.nn as nn

dist.init_process_group("gloo")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Linear(2, 2)
        self.aux = nn.Linear(2, 1)

    def forward(self, x, use_aux):
        return self.main(x).sum() + (self.aux(x).sum() if use_aux else 0)


model = nn.parallel.DistributedDataParallel(Net())
model(torch.ones(1, 2), use_aux=False).backward()  # aux gets no grad: its bucket is never reduced
model(torch.ones(1, 2), use_aux=True)  # RuntimeError: Expected to have finished reduction in the prior iteration ...
