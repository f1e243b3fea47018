"""fewest-ranks (passes/ranks.py): the exact program before and after its units."""

from __future__ import annotations

from shrinkgpu.passes import FewestRanks
from shrinkgpu.syntax import Facts

from .helpers import each, start

SPAWNS = """\
import torch.multiprocessing as mp

def worker(rank, world_size, cfg):
    pass

if __name__ == "__main__":
    world_size = 4
    mp.spawn(worker, args=(world_size, {"lr": 0.1}), nprocs=world_size, join=True)
"""


def test_the_failing_ranks_function_is_called_directly_at_level_0():
    texts = each(FewestRanks(), start(SPAWNS, Facts(rank=1)), 0)
    assert texts == [SPAWNS.replace('mp.spawn(worker, args=(world_size, {"lr": 0.1}), nprocs=world_size, join=True)',
                                    'worker(1, world_size, {"lr": 0.1})')]


def test_rank_0_when_the_first_error_named_no_rank():
    texts = each(FewestRanks(), start(SPAWNS), 0)
    assert "    worker(0, world_size, {\"lr\": 0.1})\n" in texts[0]


def test_one_then_two_ranks_with_the_world_size_it_passes():
    # the world size the function reads goes with nprocs: one rank told it is one of four
    # would wait for three peers at its rendezvous
    one = each(FewestRanks(), start(SPAWNS), 1)
    assert one == [SPAWNS.replace('args=(world_size, {"lr": 0.1}), nprocs=world_size',
                                  'args=(1, {"lr": 0.1}), nprocs=1')]
    two = each(FewestRanks(), start(SPAWNS), 2)
    assert two == [SPAWNS.replace('args=(world_size, {"lr": 0.1}), nprocs=world_size',
                                  'args=(2, {"lr": 0.1}), nprocs=2')]
    assert FewestRanks().units(start(SPAWNS), 3) is None


def test_start_processes_and_args_by_name():
    src = ("import torch.multiprocessing as mp\n"
           "def run(i, a):\n    pass\n"
           "params = (3,)\n"
           "mp.start_processes(run, params, 2, start_method='fork')\n")
    assert each(FewestRanks(), start(src, Facts(rank=0)), 0) == [src.replace(
        "mp.start_processes(run, params, 2, start_method='fork')", "run(0, *params)")]
    # already the fewest the level offers: nothing
    assert not FewestRanks().units(start(src), 2)
    assert each(FewestRanks(), start(src), 1) == [src.replace("params, 2,", "params, 1,")]


def test_a_call_of_another_spawn_is_left_alone():
    src = "import os, pexpect\nimport torch.multiprocessing as mp\nos.spawn('ls')\npexpect.spawn(cmd)\nmp.spawn\n"
    assert FewestRanks().units(start(src), 0) == []


def test_every_way_the_starter_is_imported():
    for imports, call in (("import torch", "torch.multiprocessing.spawn"),
                          ("from torch.multiprocessing import spawn", "spawn"),
                          ("from torch import multiprocessing as tmp", "tmp.spawn")):
        src = f"{imports}\ndef run(i):\n    pass\n{call}(run, nprocs=2)\n"
        assert each(FewestRanks(), start(src), 0) == [src.replace(f"{call}(run, nprocs=2)", "run(0)")]


def test_a_process_started_of_the_users_own_becomes_its_call():
    # what the deletions leave of the dist_tuto loop: one Process, started
    src = ("from torch.multiprocessing import Process\n"
           "def run(rank, size, fn):\n    pass\n"
           "Process(target=run, args=(0, 2, print)).start()\n")
    assert each(FewestRanks(), start(src), 0) == [src.replace("Process(target=run, args=(0, 2, print)).start()",
                                                              "run(0, 2, print)")]
    import_mp = "import multiprocessing as mp\ndef run():\n    pass\nmp.Process(target=run).start()\n"
    assert each(FewestRanks(), start(import_mp), 0) == [import_mp.replace("mp.Process(target=run).start()", "run()")]
    # a process of a library's target, or one not started there, is left
    assert not FewestRanks().units(start("import threading\nthreading.Thread(target=f).start()\n"), 0)


def test_a_process_bound_to_a_name_and_started_becomes_its_call():
    src = ("from torch.multiprocessing import Process\n"
           "def init_process(rank, size):\n    pass\n"
           "p = Process(target=init_process, args=(0, 2))\n"
           "p.start()\n")
    assert each(FewestRanks(), start(src), 0) == [
        "from torch.multiprocessing import Process\n"
        "def init_process(rank, size):\n    pass\n"
        "p = init_process(0, 2)\n"]
