# torchrun --nproc_per_node=2 --standalone ideal_cut.py
# all_reduce of a float32 tensor on rank 0 and an int64 one on rank 1 (a meter that saw no batch).
# Rank 0 dies with SIGABRT: terminate called after throwing an instance of 'gloo::EnforceNotMet'
#   ... Received data size doesn't match expected size ...
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
buf = torch.tensor([0.5, 2.0]) if dist.get_rank() == 0 else torch.tensor([0, 0])
dist.all_reduce(buf)
