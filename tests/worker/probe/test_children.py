"""probe/children.py with real processes: the ranks a script starts itself (mp.spawn,
start_processes with the fork method, multiprocessing.Process targets) each watched as a
run of its own, in fresh runs and in forked candidates (whose spawned ranks are forked
from the zygote), and their first error taken as the run's."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import psutil

from shrinkgpu.launch import Launch
from shrinkgpu.worker import Isolation, Runner, ScriptSpec, Watch
from shrinkgpu.worker.ranks import free_port

SPAWN = """\
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F


def worker(rank, world):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['PORT']}", rank=rank, world_size=world)
    F.cross_entropy(torch.randn(3, 4), torch.tensor([0, 2, 3 + rank]))
    dist.barrier()


if __name__ == "__main__":
    mp.spawn(worker, args=(2,), nprocs=2)
"""

FORK_METHOD = SPAWN.replace("mp.spawn(worker, args=(2,), nprocs=2)",
                            "mp.start_processes(worker, args=(2,), nprocs=2, start_method='fork')")

PROCESS_TARGETS = """\
import os
import torch
import torch.distributed as dist
from multiprocessing import Process


def run(rank, size):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['PORT']}", rank=rank, world_size=size)
    shard = torch.arange(8.0).view(2, 4)[rank]
    if rank == 1:
        shard = shard.view(3, -1)
    dist.all_reduce(shard)


if __name__ == "__main__":
    processes = []
    for rank in range(2):
        p = Process(target=run, args=(rank, 2))
        p.start()
        processes.append(p)
    for p in processes:
        p.join()
    raise SystemExit(max(p.exitcode for p in processes))
"""

HANG = """\
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['PORT']}", rank=rank, world_size=world)
    if rank == 0:
        dist.all_reduce(torch.ones(2))  # rank 0 evaluates alone...
    dist.barrier()  # ...while rank 1 waits for it here: gloo waits 30 minutes


if __name__ == "__main__":
    mp.spawn(worker, args=(2,), nprocs=2)
"""

LOADER = """\
import torch
from torch.utils.data import DataLoader, Dataset


class Broken(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return torch.zeros(2)[i]


for batch in DataLoader(Broken(), batch_size=2, num_workers=1):
    pass
"""


def reduce_spec(tmp_path: Path, text: str, launch: Launch = Launch()) -> ScriptSpec:
    (tmp_path / "s.py").write_text(text)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/root"),
           "PORT": str(free_port()),
           **({"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {})}
    return ScriptSpec(script=tmp_path / "s.py", cwd=tmp_path, env=env, launch=launch)


def observe(spec: ScriptSpec, isolation: Isolation, **watch):
    with Runner(spec, isolation=isolation) as runner:
        runner.start(["torch", "torch.distributed", "torch.multiprocessing", "torch.nn.functional"]
                     if isolation is Isolation.FORK else [], required=True)
        obs = runner.run({"s.py": spec.script.read_text()}, timeout=120, watch=Watch(**watch))
    return obs


def no_process_left() -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        left = [p for p in psutil.Process().children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE]
        left = [p for p in left if "pytest" not in " ".join(p.cmdline())]
        if not left:
            return
        time.sleep(0.1)
    raise AssertionError(f"left running: {[p.cmdline() for p in left]}")


def test_a_spawned_ranks_error_is_the_first_error_fresh_and_forked_from_the_zygote(tmp_path):
    fresh = observe(reduce_spec(tmp_path, SPAWN), Isolation.FRESH, keep_raised=str(tmp_path / "raised"))
    # not the parent's ProcessRaisedException quoting it: rank 1's own error, with its operator
    sig = fresh.signature
    assert (sig.type, sig.message) == ("IndexError", "Target 4 is out of bounds.")
    assert sig.op.name == "torch.nn.functional.cross_entropy"
    assert [(t.dtype, t.shape) for t in sig.op.tensors] == [("float32", (3, 4)), ("int64", (3,))]
    assert (fresh.rank, fresh.world_size, fresh.launcher) == (1, 2, "mp.spawn")
    assert [c["method"] for c in fresh.children] == ["spawn", "spawn"]
    # the arguments of the call that raised, kept by the rank as it raised (the extracted call)
    assert [r["op"] for r in fresh.raised_calls] == ["torch.nn.functional.cross_entropy"]
    assert Path(fresh.raised_calls[0]["path"]).is_file()
    forked = observe(reduce_spec(tmp_path, SPAWN, Launch(starter="mp.spawn", fresh_children=2)), Isolation.FORK)
    assert forked.signature.same_bug(sig) and (forked.rank, forked.world_size) == (1, 2)
    no_process_left()


def test_ranks_started_with_the_fork_method_record_in_the_parents_probe(tmp_path):
    obs = observe(reduce_spec(tmp_path, FORK_METHOD), Isolation.FRESH)
    assert obs.signature.type == "IndexError" and obs.signature.op.name == "torch.nn.functional.cross_entropy"
    assert (obs.rank, obs.world_size, obs.launcher) == (1, 2, "start_processes")
    assert [c["method"] for c in obs.children] == ["fork", "fork"]
    no_process_left()


def test_process_targets_of_the_users_own_are_ranks(tmp_path):
    obs = observe(reduce_spec(tmp_path, PROCESS_TARGETS), Isolation.FRESH)
    sig = obs.signature
    assert sig.type == "RuntimeError" and "shape '[3, -1]' is invalid" in sig.message
    assert sig.op.name == "Tensor.view" and obs.rank == 1
    assert (obs.world_size, obs.launcher) == (2, "multiprocessing.Process")
    no_process_left()


def test_spawned_ranks_that_hang_are_stopped_by_the_one_rule(tmp_path):
    # (no starter in the launch: the parent, stopped with its hanging ranks, writes no
    # report; what it said it started as it started them names them)
    spec = reduce_spec(tmp_path, HANG, Launch(fresh_children=2, hang_after=2.0))
    started = time.monotonic()
    obs = observe(spec, Isolation.FORK)
    assert obs.signature.type == "Hang"
    assert obs.signature.message == ("rank 0 waits in torch.distributed.all_reduce (in worker); rank 1 waits in "
                                     "torch.distributed.barrier (in worker): a collective not every rank reaches")
    assert (obs.rank, obs.world_size, obs.launcher) == (0, 2, "mp.spawn")
    assert "torch.distributed" in {name for name, _f, _l in obs.modules}  # what a fork server preloads
    assert time.monotonic() - started < 60  # gloo's own timeout is 30 minutes
    no_process_left()


def test_a_dataloaders_workers_are_not_ranks(tmp_path):
    obs = observe(reduce_spec(tmp_path, LOADER), Isolation.FRESH)
    assert obs.children == () and obs.launcher is None
    assert obs.signature.type == "IndexError"  # the DataLoader's own re-raise in the parent
    assert dataclasses.replace(obs).rank is None
