"""launch.py: torchrun's command line and its environment contract."""

from __future__ import annotations

import pytest

from shrinkgpu.launch import (
    PLAIN,
    Launch,
    LaunchError,
    is_torchrun,
    nproc_of,
    rank_environment,
    torchrun_command,
    torchrun_options,
)


def test_the_users_torchrun_command_line_is_read_with_torchruns_grammar():
    command = torchrun_command(["torchrun", "--nproc_per_node=2", "--standalone", "train.py", "--epochs", "3"])
    assert (command.script, command.module, command.args) == ("train.py", None, ("--epochs", "3"))
    assert command.launch.nproc == 2 and command.launch.ranks
    # the dashed spelling, a value apart, and python -m torch.distributed.run
    command = torchrun_command(["python3", "-m", "torch.distributed.run", "--nproc-per-node", "4", "--role", "trainer",
                                "--rdzv-id", "job7", "train.py"])
    assert (command.launch.nproc, command.launch.role, command.launch.run_id) == (4, "trainer", "job7")
    # a module, and its arguments
    command = torchrun_command(["torchrun", "--nproc_per_node=2", "-m", "pkg.train", "--lr", "0.1"])
    assert (command.script, command.module, command.args) == (None, "pkg.train", ("--lr", "0.1"))


def test_options_that_only_shape_torchruns_logs_are_accepted_and_said():
    command = torchrun_options(["--nproc_per_node=2", "--master_port=29500", "--tee", "3", "--max-restarts=2",
                                "train.py"])
    notes = " ".join(command.launch.notes)
    assert command.launch.master_port == 29500 and "replaced by a free port for each candidate" in notes
    assert "--max-restarts=2: the first failure is what is reduced" in notes
    assert "--tee shape its own logs" in notes


@pytest.mark.parametrize("argv, said", [
    (["--nnodes=2", "train.py"], "--nnodes=2: shrinkgpu runs every rank on this machine"),
    (["--node-rank=1", "train.py"], "with one node the only node rank is 0"),
    (["--rdzv-backend=etcd", "train.py"], "--rdzv-backend=etcd"),
    (["--master-addr=10.0.0.5", "train.py"], "the ranks run on this machine"),
    (["--no-python", "bash", "run.sh"], "not Python"),
    (["--nproc_per_node=2"], "names no script"),
    (["--frobnicate", "train.py"], "torchrun has no option --frobnicate"),
    (["--nproc_per_node=many", "train.py"], "a number of ranks"),
])
def test_what_no_run_on_this_machine_can_honour_is_refused_with_what_to_do(argv, said):
    with pytest.raises(LaunchError, match=said):
        torchrun_options(argv, gpus=0)


def test_nproc_counts_gpus_or_cpus_as_torchrun_does():
    assert nproc_of("3") == 3
    assert nproc_of("gpu", gpus=4) == 4 and nproc_of("cpu", cpus=8) == 8 and nproc_of("auto", gpus=0, cpus=2) == 2
    with pytest.raises(LaunchError, match="no GPU is visible"):
        nproc_of("gpu", gpus=0)


def test_only_torchrun_and_its_modules_are_launchers():
    assert is_torchrun(["torchrun", "x.py"]) and is_torchrun(["/venv/bin/torchrun", "x.py"])
    assert is_torchrun(["python", "-m", "torch.distributed.launch", "x.py"])
    assert not is_torchrun(["python", "x.py"]) and not is_torchrun(["train.py"])


def test_each_rank_gets_torchruns_environment_and_the_store_on_rank_0():
    launch = Launch(nproc=2, ranks=True, run_id="job7", max_restarts=1)
    env = rank_environment(launch, 1, 41234, env={})
    assert env == {
        "RANK": "1", "LOCAL_RANK": "1", "GROUP_RANK": "0", "ROLE_RANK": "1", "ROLE_NAME": "default",
        "LOCAL_WORLD_SIZE": "2", "WORLD_SIZE": "2", "GROUP_WORLD_SIZE": "1", "ROLE_WORLD_SIZE": "2",
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "41234", "TORCHELASTIC_RESTART_COUNT": "0",
        "TORCHELASTIC_MAX_RESTARTS": "1", "TORCHELASTIC_RUN_ID": "job7", "TORCHELASTIC_USE_AGENT_STORE": "False",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "OMP_NUM_THREADS": "1",
    }
    # the user's OMP_NUM_THREADS stays; one rank gets none of torchrun's cap
    assert rank_environment(launch, 0, 1, env={"OMP_NUM_THREADS": "4"})["OMP_NUM_THREADS"] == "4"
    assert "OMP_NUM_THREADS" not in rank_environment(Launch(nproc=1, ranks=True), 0, 1, env={})


def test_the_command_a_maintainer_runs():
    assert Launch(nproc=2, ranks=True).command("repro.py", ("--x", "1")) == (
        "torchrun --standalone --nproc-per-node=2 repro.py --x 1")
    assert PLAIN.command("repro.py") == "python repro.py"
