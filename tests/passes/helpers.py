"""Programs for the pass tests, and what a pass makes of them.

No processes and no torch: the programs mention torch only in their text.
"""

from __future__ import annotations

import textwrap

from shrinkgpu.syntax import Candidate, Facts, Program


def program(src: str, facts: Facts | None = None, **modules: str) -> Program:
    """``a.py`` (the main file) from ``src``, plus ``name.py`` for each keyword."""
    files = {"a.py": textwrap.dedent(src)}
    files.update({f"{name}.py": textwrap.dedent(text) for name, text in modules.items()})
    return Program(files, "a.py", facts)


def start(src: str, facts: Facts | None = None, **modules: str) -> Candidate:
    return program(src, facts, **modules).initial()


def after(p, cand: Candidate, level: int = 0, file: str = "a.py") -> str:
    """The text of ``file`` with every unit the pass proposes at ``level`` applied."""
    units = p.units(cand, level)
    assert units, f"{p.name} proposed nothing at level {level}"
    return p.apply(cand, units).files[file]


def each(p, cand: Candidate, level: int = 0, file: str = "a.py") -> list[str]:
    """The text of ``file`` with each unit the pass proposes at ``level`` applied alone.
    A pass that proposes nothing fails here: a test that means "nothing to propose"
    says so itself (``assert not p.units(cand, level)``), so that no assertion over the
    texts passes for want of any."""
    units = p.units(cand, level)
    assert units, f"{p.name} proposed nothing at level {level}"
    return [p.apply(cand, [u]).files[file] for u in units]


def each_over(p, cand: Candidate, levels, file: str = "a.py") -> list[str]:
    """``each`` at every level of ``levels`` in turn: one level may propose nothing, but
    a pass that proposes nothing at any of them fails here."""
    texts = [p.apply(cand, [u]).files[file] for level in levels for u in p.units(cand, level) or ()]
    assert texts, f"{p.name} proposed nothing at levels {list(levels)}"
    return texts


def dedent(src: str) -> str:
    return textwrap.dedent(src)


def line_of(src: str, code: str) -> int:
    """The 1-based line of the one line of ``src`` (dedented) that starts with ``code``
    after its indentation: where a run would report that statement."""
    lines = dedent(src).splitlines()
    found = [i + 1 for i, line in enumerate(lines) if line.lstrip().startswith(code)]
    assert len(found) == 1, (code, found)
    return found[0]


# Here rather than in one test file: the tests of delete-definitions (definitions.py)
# and of delete-statements (statements.py) read the same program.
DEFS = """\
import torch


def helper():
    return 2


class Net:
    def forward(self, x):
        return x


x = torch.ones(2)
if x.sum() > 0:
    y = helper() * x
    z = 1
print(y)
"""
