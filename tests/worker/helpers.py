"""What the worker tests with real processes share: the user's project as these tests
lay it out (``cd project/work && python ../s.py ARGS < stdin``), scripts and their
facts, and process-tree helpers.  Their fixtures are in tests/worker/conftest.py.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

from shrinkgpu.worker import Isolation, Observation, Runner, Watch

# What the user typed: ``cd project/work && python ../s.py ARGS < stdin``.  The
# arguments carry the error text on purpose (a worker whose argv held the reducer's
# command line once made argparse echo it and fake a match).
ARGV0 = "../s.py"
ARGS = ("--lr", "0.1", "IndexError: Target 4 is out of bounds.", "--note=device-side assert triggered")
STDIN = b"first line\nTarget 4 is out of bounds.\n\x00\xff\xfe last"
ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "HOME": os.environ.get("HOME", "/root"),
    "SHRINK_TEST_VALUE": "spaces, = and\na newline: Target 4",
}
LEAK_MARKER = "SHRINKGPU_TEST_REDUCER_ONLY"

CE_CALL = "F.cross_entropy(torch.randn(3, 4), torch.tensor([0, 2, 4]))"


HEADER = "import sys\nimport torch\nimport torch.nn.functional as F\n"

ORIGINAL_FILES = {
    "s.py": "print('the original, never run by these tests')\n",
    "helper.py": "VALUE = 41\n",
    "mypkg/__init__.py": "NAME = 'mypkg'\n",
    "work/data.txt": "original data\n",
    "work/old.txt": "to be deleted by a candidate\n",
    "work/keep.bin": bytes(range(256)) * 4,
}


# -- helpers ----------------------------------------------------------------------------
def script(text: str) -> dict[str, str]:
    return {"s.py": textwrap.dedent(text)}


def line_of(text: str, needle: str) -> int:
    """1-based number of the line of ``text`` that contains ``needle``."""
    for number, line in enumerate(textwrap.dedent(text).splitlines(), 1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in script")


def snapshot(root: Path) -> dict[str, tuple[bytes, int, int]]:
    """Every file under ``root`` with its bytes, mode and mtime; every directory."""
    out: dict[str, tuple[bytes, int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            data = path.read_bytes() if path.is_file() else b"<dir>"
            out[str(path.relative_to(root))] = (data, st.st_mode, st.st_mtime_ns)
    return out


def make_project(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        os.chmod(path, 0o644)


def run(runner: Runner, text: str, timeout: float = 20.0, isolation: Isolation | None = None, **watch) -> Observation:
    """One run of ``text``; ``watch``: what it records beyond its first error (``Watch``'s fields)."""
    return runner.run(script(text), timeout=timeout, isolation=isolation, watch=Watch(**watch))


def cuda_build() -> bool:
    """Whether the torch under test is a CUDA build (its import maps the driver)."""
    import torch

    return torch.backends.cuda.is_built()


def python_path(*dirs) -> str:
    """``dirs`` ahead of the inherited PYTHONPATH: a run under evaluation.newest_torch
    gets its torch through PYTHONPATH, and a test's own directory must not hide it."""
    inherited = os.environ.get("PYTHONPATH")
    return os.pathsep.join([*map(str, dirs), *([inherited] if inherited else [])])
