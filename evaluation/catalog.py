"""The catalog of the evaluation's cases: one folder each, one ``case.toml`` each (evaluation/README.md).

A case is a failing script with the error a user would keep, the first error it is
expected to raise, the batch (suite) it was written in and tags saying what kind of
script it is.  The cases live in ``evaluation/cases/<name>/``; the test fixtures, in the
same layout, in ``tests/fixtures/<name>/`` (suite ``fixtures``).  Names are unique
across both, so a name alone finds a case.

Selection is by suite, by tag and by name.  A case marked ``held_out`` is never used to
tune passes: ``select`` leaves it out unless the caller says the run is a measurement
(``measure=True``), and a caller that names one explicitly is refused.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASES = REPO / "evaluation" / "cases"
FIXTURES = REPO / "tests" / "fixtures"
ROOTS = (FIXTURES, CASES)
METADATA = "case.toml"

REQUIRED = ("script", "args", "keep_error", "suite", "tags", "held_out", "written", "device")
REQUIRED_EXPECT = ("exception", "operator")
# The tags the README defines; a case may carry others when none of these says it.
KNOWN_TAGS = ("long", "compile", "distributed", "notebook", "framework", "multifile", "fixture", "gpu")


class HeldOut(ValueError):
    """A held-out case was asked for by a run that is not a measurement."""


@dataclass(frozen=True)
class Case:
    name: str
    dir: Path
    script: str
    args: tuple[str, ...]
    keep_error: str
    suite: str
    tags: tuple[str, ...]
    held_out: bool
    written: str
    device: str
    exception: str  # "" when not compared
    operator: str  # "" when unknown or when no torch call the user wrote raised it
    kind: str | None = None  # what the comparisons after the search say (fixtures)
    nproc_per_node: int | None = None  # launched as torchrun would, with this many ranks
    notes: str = ""

    @property
    def path(self) -> Path:
        return self.dir / self.script

    @property
    def ideal(self) -> Path | None:
        p = self.dir / "ideal_cut.py"
        return p if p.is_file() else None

    @property
    def rel_dir(self) -> str:
        """The folder relative to the repository (``evaluation/cases/yaml_har``)."""
        return str(self.dir.relative_to(REPO))


def parse(directory: Path) -> Case:
    """The case of ``directory`` (which holds a ``case.toml``)."""
    data = tomllib.loads((directory / METADATA).read_text(encoding="utf-8"))
    missing = [k for k in REQUIRED if k not in data]
    expect = data.get("expect") or {}
    missing += [f"expect.{k}" for k in REQUIRED_EXPECT if k not in expect]
    if missing:
        raise ValueError(f"{directory / METADATA}: missing {', '.join(missing)}")
    nproc = data.get("nproc_per_node")
    return Case(
        name=directory.name,
        dir=directory,
        script=data["script"],
        args=tuple(data["args"]),
        keep_error=data["keep_error"],
        suite=data["suite"],
        tags=tuple(data["tags"]),
        held_out=bool(data["held_out"]),
        written=str(data["written"]),
        device=data["device"],
        exception=expect["exception"],
        operator=expect["operator"],
        kind=expect.get("kind"),
        nproc_per_node=int(nproc) if nproc is not None else None,
        notes=data.get("notes", ""),
    )


def folders() -> list[Path]:
    """Every case folder, fixtures first, each root in name order."""
    return [p.parent for root in ROOTS for p in sorted(root.glob(f"*/{METADATA}"))]


def all_cases() -> list[Case]:
    return [parse(d) for d in folders()]


def load(name: str) -> Case:
    """A case by name (``class_index``, ``yaml_har``)."""
    for root in ROOTS:
        if (root / name / METADATA).is_file():
            return parse(root / name)
    raise KeyError(f"no case named {name!r} (under {', '.join(str(r.relative_to(REPO)) for r in ROOTS)})")


def _split(text: str | None) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


def select(*, suites: str | None = None, tags: str | None = None, exclude_tags: str | None = None,
           names: str | None = None, measure: bool = False) -> tuple[list[Case], list[Case]]:
    """(selected, held out and left out) for comma-separated suites, tags (a case with any
    of them), tags to exclude and names; no filter selects every case.

    Named cases are refused with ``HeldOut`` when held out and ``measure`` is false; cases
    a suite or tag selected are left out instead (the second list)."""
    wanted_names = _split(names)
    if wanted_names:
        chosen = [load(n) for n in wanted_names]
    else:
        chosen = all_cases()
    want_suites, want_tags, drop_tags = set(_split(suites)), set(_split(tags)), set(_split(exclude_tags))
    chosen = [c for c in chosen
              if (not want_suites or c.suite in want_suites)
              and (not want_tags or want_tags & set(c.tags))
              and not (drop_tags & set(c.tags))]
    if measure:
        return chosen, []
    held = [c for c in chosen if c.held_out]
    if held and wanted_names:
        raise HeldOut(f"held out from tuning: {', '.join(c.name for c in held)}; pass --measure when this run is "
                      "a measurement (evaluation/README.md, 'Tuning and measuring')")
    return [c for c in chosen if not c.held_out], held


def suites() -> list[str]:
    """The suites the cases name, fixtures first, then in name order."""
    names = {c.suite for c in all_cases()}
    return sorted(names, key=lambda s: (s != "fixtures", s))
