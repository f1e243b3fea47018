# torchrun --nproc_per_node=2 --standalone ideal_cut.py
# The state_dict of a fully_shard'ed module holds DTensors; a plain module cannot copy them in.
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

dist.init_process_group("gloo")
mesh = init_device_mesh("cpu", (dist.get_world_size(),))
sharded = nn.Linear(4, 4)
fully_shard(sharded, mesh=mesh)
nn.Linear(4, 4).load_state_dict(sharded.state_dict())
# RuntimeError: Error(s) in loading state_dict for Linear: ... aten.copy_.default got mixed torch.Tensor and DTensor ...
