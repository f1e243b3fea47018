from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import threading
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"  # one case.toml each (evaluation/README.md)


@dataclass(frozen=True)
class Fixture:
    name: str
    dir: Path
    script: str
    args: tuple[str, ...]
    keep_error: str
    exception: str
    operator: str
    device: str = "cpu"
    kind: str | None = None  # what the comparisons after the search say (ablation.kinds)

    @property
    def path(self) -> Path:
        return self.dir / self.script


def load_fixture(name: str) -> Fixture:
    d = FIXTURES / name
    data = tomllib.loads((d / "case.toml").read_text())
    return Fixture(
        name=name,
        dir=d,
        script=data["script"],
        args=tuple(data.get("args", ())),
        keep_error=data["keep_error"],
        exception=data["expect"]["exception"],
        operator=data["expect"]["operator"],
        device=data.get("device", "cpu"),
        kind=data["expect"].get("kind"),
    )


ALL_FIXTURES = sorted(p.parent.name for p in FIXTURES.glob("*/case.toml"))
FIXTURE_NAMES = [n for n in ALL_FIXTURES if load_fixture(n).device == "cpu"]
CUDA_FIXTURE_NAMES = [n for n in ALL_FIXTURES if load_fixture(n).device == "cuda"]


def interruptible(cmd: list[str], cwd: Path) -> tuple[subprocess.Popen, list[str]]:
    """``cmd`` started so that SIGINT reaches it as Ctrl-C would, and the lines of its
    stderr as they come: a suite started in the background of a non-interactive shell
    inherits SIGINT ignored, and Python then installs no handler."""
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True).start()
    return proc, lines


def tree_digest(directory: Path) -> dict[str, str]:
    """Every file under ``directory`` with its content hash: equal before and after
    means nothing was written, changed, added or removed."""
    out = {}
    for p in sorted(directory.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            out[str(p.relative_to(directory))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


# Workers for ``-n auto`` (pyproject.toml): every test process imports torch and the
# reductions start workers of their own, so more than a few compete for memory and cores
# instead of finishing sooner.
MAX_TEST_PROCESSES = 4


def pytest_xdist_auto_num_workers(config):
    return max(1, min(os.cpu_count() or 1, MAX_TEST_PROCESSES))


def _shares_fixtures(item) -> bool:
    """Whether ``item`` uses a fixture made once for its module or class (a fork server,
    a reduction several tests read)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return True
    return any(defs and defs[-1].scope in ("module", "class", "package") for defs in info.name2fixturedefs.values())


# First: xdist's own hook (in each test process) reads the ``xdist_group`` marks into the
# test ids; added after it, they group nothing and a module's shared fixture (a fork
# server, a whole reduction) is made again in each process.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    # Under xdist's loadgroup, a test with a group runs on the process that runs its
    # group.  A module's tests are one group, so what they share is made once, except
    # whole reductions that share nothing: those go to whichever process is free, and
    # first, so that a long one started last does not keep the others waiting.
    alone = {id(item) for item in items if "slow" in item.keywords and not _shares_fixtures(item)}
    for item in items:
        if id(item) not in alone:
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
    heavy = {item.module.__name__ for item in items if "slow" in item.keywords}
    items.sort(key=lambda item: (id(item) not in alone, item.module.__name__ not in heavy))
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except Exception:
        has_cuda = False
    if has_cuda:
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


# Thresholds that tell a long original from a short one: the state saved at the failing
# step, the cut start (``state.LONG_RUN``, in units of the run's import of torch), the
# first run kept for --resume (seconds).  A fixture runs under two imports, and the
# first is a ratio a loaded machine does not move; but a test of a script that is short
# by construction pins both above any run, so that its reduction takes the path it was
# written for whatever the machine; the tests of those paths set them to 0 themselves
# (tests/features/test_replay_state.py).
SHORT_RUN_SECONDS = 600.0
SHORT_RUN_STARTUPS = 1e6


@pytest.fixture
def short_scripts_stay_short(monkeypatch):
    import shrinkgpu.reducer.resume as kept_first
    import shrinkgpu.reducer.state as state_rules

    monkeypatch.setattr(state_rules, "LONG_RUN", SHORT_RUN_STARTUPS)
    monkeypatch.setattr(kept_first, "KEEP_MIN_SECONDS", SHORT_RUN_SECONDS)


def first_error(tmp_path: Path, name: str, text: str):
    """The signature of ``text``'s first error, run once as ``name`` in a fresh worker."""
    import textwrap

    from shrinkgpu.reducer import ReduceConfig, run_once

    script = tmp_path / name
    script.write_text(textwrap.dedent(text))
    obs, _ = run_once(ReduceConfig(script=script, keep_error="."))
    assert obs.signature is not None, obs.describe()
    return obs.signature
