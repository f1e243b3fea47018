"""How the user starts the script's processes: one ``python``, or ranks as ``torchrun``
starts them on one machine.

``Launch`` is what a reduction keeps of it: how many ranks, and what torchrun's options
asked that the ranks' environment shows (the role, the run id, the restarts allowed).
``torchrun_command`` reads the user's own command line with torchrun's grammar
(``torchrun [options] script [args]``, ``python -m torch.distributed.run [options]
script [args]``): the options that decide how ranks run are honoured, the ones that only
shape torchrun's own logs are accepted, and the ones no single-machine run can honour
are refused with what to do instead.  ``rank_environment`` is torchrun's contract for
one rank (``torch/distributed/elastic/agent/server/local_elastic_agent.py``).

Standard library only, below everything that runs a program.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
from dataclasses import dataclass
from typing import Mapping

MASTER_ADDR = "127.0.0.1"
# Seconds every running rank must wait in a collective (not all in the same one) before
# the job is taken to hang (worker/ranks.py).
HANG_AFTER = 20.0
TORCHRUN_MODULES = ("torch.distributed.run", "torch.distributed.launch")


class LaunchError(ValueError):
    """A command line that cannot be run as asked; the message says what to do."""


@dataclass(frozen=True)
class Launch:
    """``nproc`` ranks on this machine, each with torchrun's environment (``ranks``:
    whether there is a launcher at all; a plain ``python`` run has none)."""

    nproc: int = 1
    ranks: bool = False
    role: str = "default"
    run_id: str = "none"
    max_restarts: int = 0
    master_port: int | None = None  # what the user asked; every candidate gets a free port of its own
    notes: tuple[str, ...] = ()  # what was accepted but changes nothing, for the report
    hang_after: float = HANG_AFTER  # (ours, not torchrun's: --hang-after)
    # a script that starts its own ranks (its first run said so): how ("mp.spawn",
    # "start_processes", "multiprocessing.Process"), and how many it starts as new
    # interpreters (the spawn and forkserver methods; 0: none), which a forked candidate
    # forks from a copy of itself made before the script ran (worker/probe/children.py)
    starter: str | None = None
    fresh_children: int = 0

    @property
    def distributed(self) -> bool:
        return self.ranks

    def with_nproc(self, nproc: int) -> "Launch":
        return dataclasses.replace(self, nproc=nproc)

    def command(self, script: str, args: tuple[str, ...] = (), module: str | None = None) -> str:
        """The command a maintainer runs: torchrun with the ranks, else python."""
        target = ["-m", module] if module else [script]
        if not self.ranks:
            return shlex.join(["python", *target, *args])
        return shlex.join(["torchrun", "--standalone", f"--nproc-per-node={self.nproc}", *target, *args])


PLAIN = Launch()


def rank_environment(launch: Launch, rank: int, port: int, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables torchrun gives rank ``rank`` of ``launch`` on one node, the store on
    ``port`` (rank 0 hosts it: the agent's store is not used)."""
    env = os.environ if env is None else env
    n = launch.nproc
    out = {
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "GROUP_RANK": "0",
        "ROLE_RANK": str(rank),
        "ROLE_NAME": launch.role,
        "LOCAL_WORLD_SIZE": str(n),
        "WORLD_SIZE": str(n),
        "GROUP_WORLD_SIZE": "1",
        "ROLE_WORLD_SIZE": str(n),
        "MASTER_ADDR": MASTER_ADDR,
        "MASTER_PORT": str(port),
        "TORCHELASTIC_RESTART_COUNT": "0",
        "TORCHELASTIC_MAX_RESTARTS": str(launch.max_restarts),
        "TORCHELASTIC_RUN_ID": launch.run_id,
        "TORCHELASTIC_USE_AGENT_STORE": "False",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": env.get("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"),
    }
    # torchrun sets one OpenMP thread per rank unless the user chose a number.
    if env.get("OMP_NUM_THREADS"):
        out["OMP_NUM_THREADS"] = env["OMP_NUM_THREADS"]
    elif n > 1:
        out["OMP_NUM_THREADS"] = "1"
    return out


# -- torchrun's grammar -------------------------------------------------------------------------
# Options with a value, by every spelling torchrun accepts; and flags.
_VALUED = {
    "nnodes", "nproc_per_node", "rdzv_backend", "rdzv_endpoint", "rdzv_id", "rdzv_conf", "max_restarts",
    "monitor_interval", "start_method", "event_log_handler", "role", "log_dir", "redirects", "tee",
    "local_ranks_filter", "duplicate_stdout_filters", "duplicate_stderr_filters", "node_rank", "master_addr",
    "master_port", "local_addr", "logs_specs", "numa_binding", "shutdown_timeout", "signals_to_handle",
}
_FLAGS = {"standalone", "module", "no_python", "run_path", "virtual_local_rank"}
_SHORT = {"-m": "module", "-r": "redirects", "-t": "tee"}
# Accepted, and changing nothing a reduction sees: they shape torchrun's own logs and
# process handling (candidates are forked from a preloaded server, not spawned).
_IGNORED = {"monitor_interval", "start_method", "event_log_handler", "log_dir", "redirects", "tee",
            "local_ranks_filter", "duplicate_stdout_filters", "duplicate_stderr_filters", "logs_specs",
            "shutdown_timeout", "signals_to_handle", "rdzv_conf", "local_addr", "run_path"}
_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}


@dataclass(frozen=True)
class Command:
    """A user's command line read: how the ranks start, then the script (or module) and
    its own arguments."""

    launch: Launch
    script: str | None
    module: str | None
    args: tuple[str, ...]


def is_torchrun(argv: list[str] | tuple[str, ...]) -> bool:
    """Whether ``argv`` (a command line as typed) starts ranks with torchrun."""
    if not argv:
        return False
    head = os.path.basename(argv[0])
    if head in ("torchrun", "torchrun.exe"):
        return True
    if head.startswith("python") and len(argv) >= 3 and argv[1] == "-m" and argv[2] in TORCHRUN_MODULES:
        return True
    return False


def torchrun_command(argv: list[str] | tuple[str, ...], gpus: int = 0, cpus: int | None = None) -> Command:
    """``argv`` as torchrun reads it: ``torchrun [options] script [args]`` or ``python -m
    torch.distributed.run [options] script [args]``; ``gpus``, ``cpus``: what
    ``--nproc-per-node gpu|cpu|auto`` count."""
    argv = list(argv)
    if not is_torchrun(argv):
        raise LaunchError(f"not a torchrun command line: {shlex.join(argv)}")
    rest = argv[1:] if os.path.basename(argv[0]).startswith("torchrun") else argv[3:]
    return torchrun_options(rest, gpus, cpus)


def torchrun_options(rest: list[str], gpus: int = 0, cpus: int | None = None) -> Command:
    """torchrun's options (without the ``torchrun`` itself), then the script and its
    arguments, read and checked."""
    values: dict[str, str] = {}
    flags: set[str] = set()
    i = 0
    while i < len(rest) and rest[i].startswith("-") and rest[i] != "--":
        word = rest[i]
        name, eq, value = word.partition("=")
        key = _SHORT.get(name) or name.lstrip("-").replace("-", "_")
        if key in _FLAGS:
            if eq:
                raise LaunchError(f"torchrun's {name} takes no value")
            flags.add(key)
            i += 1
            if key == "module":
                break  # the module's name follows
            continue
        if key not in _VALUED:
            raise LaunchError(f"torchrun has no option {name} that shrinkgpu knows: see docs/executors.md for the "
                              "torchrun options it reads")
        if not eq:
            if i + 1 >= len(rest):
                raise LaunchError(f"torchrun's {name} needs a value")
            value = rest[i + 1]
            i += 1
        values[key] = value
        i += 1
    if i < len(rest) and rest[i] == "--":
        i += 1
    if i >= len(rest):
        raise LaunchError("the torchrun command names no script to run")
    target, args = rest[i], tuple(rest[i + 1:])
    launch = checked_launch(values, flags, gpus, cpus)
    if "module" in flags:
        return Command(launch, None, target, args)
    return Command(launch, target, None, args)


def checked_launch(values: dict[str, str], flags: set[str], gpus: int = 0, cpus: int | None = None) -> Launch:
    """The ``Launch`` torchrun's options ask for, or ``LaunchError`` for one a run of every
    rank on this machine cannot honour."""
    if "no_python" in flags:
        raise LaunchError("torchrun --no-python runs a program that is not Python: shrinkgpu reduces Python scripts")
    nnodes = values.get("nnodes", "1")
    if nnodes not in ("1", "1:1"):
        raise LaunchError(f"--nnodes={nnodes}: shrinkgpu runs every rank on this machine; reduce with --nnodes=1 "
                          "and --nproc-per-node set to the ranks the failure needs (its world size)")
    if values.get("node_rank", "0") != "0":
        raise LaunchError(f"--node-rank={values['node_rank']}: with one node the only node rank is 0")
    backend = values.get("rdzv_backend", "static")
    if backend not in ("static", "c10d"):
        raise LaunchError(f"--rdzv-backend={backend}: shrinkgpu starts the ranks itself on this machine (c10d); "
                          "leave it out or use --standalone")
    port = None
    for key in ("master_addr", "rdzv_endpoint"):
        host = values.get(key)
        if host is None:
            continue
        name, _, number = host.rpartition(":") if key == "rdzv_endpoint" else (host, "", "")
        name = name or host
        if name.strip("[]") not in _LOCAL_HOSTS:
            raise LaunchError(f"--{key.replace('_', '-')}={host}: the ranks run on this machine, where the store "
                              f"is {MASTER_ADDR}")
        if number.isdigit():
            port = int(number)
    if "master_port" in values:
        if not values["master_port"].isdigit():
            raise LaunchError(f"--master-port={values['master_port']}: not a port number")
        port = int(values["master_port"])
    try:
        max_restarts = int(values.get("max_restarts", "0"))
    except ValueError:
        raise LaunchError(f"--max-restarts={values['max_restarts']}: not a number") from None
    notes = []
    if port is not None:
        notes.append(f"the port {port} torchrun was given is replaced by a free port for each candidate, so that "
                     "candidates run side by side (MASTER_PORT says which)")
    if max_restarts:
        notes.append(f"--max-restarts={max_restarts}: the first failure is what is reduced; no rank group is "
                     "restarted (TORCHELASTIC_MAX_RESTARTS says what you asked)")
    ignored = sorted(k for k in values if k in _IGNORED) + sorted(f for f in flags if f in _IGNORED)
    if ignored:
        notes.append("torchrun's " + ", ".join(f"--{k.replace('_', '-')}" for k in ignored) + " shape its own logs and "
                     "processes only: candidates run without them")
    return Launch(nproc=nproc_of(values.get("nproc_per_node", "1"), gpus, cpus), ranks=True,
                  role=values.get("role", "default"), run_id=values.get("rdzv_id", "none"),
                  max_restarts=max_restarts, master_port=port, notes=tuple(notes))


def nproc_of(value: str, gpus: int = 0, cpus: int | None = None) -> int:
    """torchrun's ``--nproc-per-node``: a number, or ``gpu``, ``cpu``, ``auto`` (GPUs when
    there are any, else CPUs)."""
    if value.isdigit() and int(value) >= 1:
        return int(value)
    cpus = cpus or os.cpu_count() or 1
    if value == "gpu":
        if not gpus:
            raise LaunchError("--nproc-per-node=gpu, and no GPU is visible here")
        return gpus
    if value == "cpu":
        return cpus
    if value == "auto":
        return gpus or cpus
    raise LaunchError(f"--nproc-per-node={value}: a number of ranks (or gpu, cpu, auto)")
