"""Programs for the syntax tests, their statements by text, and candidates of them.

No processes and no torch: programs mention torch only in their text.
"""

from __future__ import annotations

import textwrap

import libcst as cst

from shrinkgpu.syntax import Candidate, Edit, Facts, Program


def program(src: str, facts: Facts | None = None, **modules: str) -> Program:
    """``a.py`` (the main file) from ``src``, plus ``name.py`` for each keyword."""
    files = {"a.py": textwrap.dedent(src)}
    files.update({f"{name}.py": textwrap.dedent(text) for name, text in modules.items()})
    return Program(files, "a.py", facts)


def sid(p: Program, code: str, file: str = "a.py") -> int:
    """The id of the one statement of ``file`` whose own text starts with ``code``."""
    found = [s.id for s in p.stmts if s.file == file and own_text(p, s).startswith(code)]
    assert len(found) == 1, (code, found)
    return found[0]


def own_text(p: Program, s) -> str:
    """A statement's code without the blank and comment lines above it."""
    lines = p.modules[s.file].code_for_node(s.node).splitlines()
    while lines and (not lines[0].strip() or lines[0].lstrip().startswith("#")):
        lines.pop(0)
    return "\n".join(lines).strip()


def edited(p: Program, *edits: Edit) -> Candidate:
    return p.initial().with_edits(edits)


def text(c: Candidate, file: str = "a.py") -> str:
    return c.files[file]


def editable_ids(c: Candidate) -> list[int]:
    return [s.id for s in c.editable()]


def call_in(p: Program, code: str) -> cst.Call:
    """The outermost call on the right of the assignment or expression statement ``code``."""
    line = p.stmts[sid(p, code)].node
    small = line.body[0]
    value = small.value
    assert isinstance(value, cst.Call)
    return value


# The programs below are read by the tests of program.py and of render.py alike.
IF_CHAIN = """\
import torch
if args.cuda:  # header comment goes with the header
    # the gpu
    dev = "cuda"  # gpu
    n = 2
elif args.mps:
    dev = "mps"
else:
    dev = "cpu"
x = torch.ones(n, device=dev)
"""


DATA = """\
import torch

# make data
x = torch.randn(3, 4)  # inputs
y = f(x, 2, dim=1)
z = g(
    x,
    y,
)
"""


MAIN = """\
import torch
from helpers import make, scale as sc
import helpers

x = make(3)  # build
y = sc(x) + helpers.K
"""


HELPERS = '''\
"""Helpers."""
from __future__ import annotations
import torch

K = 2  # a constant


def make(n):
    return torch.ones(n)


def scale(t):
    return t * K


if __name__ == "__main__":
    print(make(1))
'''
