# python ideal_cut.py   (starts its own 2 ranks)
# Each rank built its own vocabulary from its shard, so the embedding sizes differ.
import os

import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn


def worker(rank):
    dist.init_process_group("gloo", rank=rank, world_size=2)
    nn.parallel.DistributedDataParallel(nn.Embedding(89 + rank, 32))
    # rank 1: RuntimeError: [1]: params[0] in this process with sizes [90, 32] appears not to match ...


if __name__ == "__main__":
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "12355"
    mp.spawn(worker, nprocs=2)  # parent: torch.multiprocessing.spawn.ProcessRaisedException
