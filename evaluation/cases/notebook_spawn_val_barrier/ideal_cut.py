import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def train(rank):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = "12355"
    dist.init_process_group("gloo", rank=rank, world_size=2)
    if rank == 0:
        dist.all_reduce(torch.ones(1))  # evaluate() -> reduce_mean(), on rank 0 only
    dist.barrier()


if __name__ == "__main__":
    mp.spawn(train, nprocs=2)
