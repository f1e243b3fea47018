# torchrun --nproc_per_node=2 --standalone ideal_cut.py
# HANGS (gloo's default process-group timeout: 30 minutes): rank 0 waits in all_reduce,
# rank 1 waits in barrier; gloo never matches the two.
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
if dist.get_rank() == 0:
    dist.all_reduce(torch.ones(1))  # rank 0's "validation" averages a metric over all ranks
dist.barrier()
