# torchrun --nproc_per_node=2 --standalone ideal_cut.py
# all_gather into buffers sized for a full eval batch, while rank 1's last batch is short.
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
local = torch.zeros(31 if rank == 1 else 32, dtype=torch.long)
bufs = [torch.empty(32, dtype=torch.long) for _ in range(dist.get_world_size())]
dist.all_gather(bufs, local)  # rank 1: ProcessGroupGloo::allgather: invalid tensor size at index 0 (expected (31), got (32))
