import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def run(rank):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "29572"
    dist.init_process_group("gloo", rank=rank, world_size=2)
    local = torch.zeros(2 - rank, 4)  # 301 docs split ceil-wise: 151 and 150 rows
    dist.all_gather([torch.empty_like(local) for _ in range(2)], local)


if __name__ == "__main__":
    mp.spawn(run, nprocs=2)
