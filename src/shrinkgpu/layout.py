"""Where a reduction writes: every file beside the result, named from the path asked for.

One rule, used by the reducer (what to refuse before any work, what the sandbox leaves
out), the report writer and ``verify``: the result goes to the output path
(``train.min.py``), or, when it needs several files, to a directory of the same name
without ``.py`` (``train.min/``); everything else is named from that *base*:

    train.min.md              the report
    train.min.json            the case file ``verify`` and ``--emit-test`` read
    train.min.<name>.pkl      a data object the result loads (load-saved-objects)
    train.extracted.py        the failing call alone (``.min`` dropped), and its .pt
    train.min.first/          the original's first run, kept for ``--resume`` (a long one)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping


@dataclass(frozen=True)
class OutputLayout:
    output: Path  # the path asked for (-o), or the default beside the script

    @classmethod
    def beside(cls, script: Path) -> "OutputLayout":
        """The default: ``<stem>.min.py`` beside the script."""
        return cls(script.with_name(f"{script.stem}.min.py"))

    @property
    def base(self) -> Path:
        """The output without ``.py``: the name every companion file starts with, and
        the directory of a result that needs several files."""
        return self.output.with_suffix("") if self.output.suffix == ".py" else self.output

    @property
    def directory(self) -> Path:
        return self.base

    @property
    def report(self) -> Path:
        return self.base.with_name(self.base.name + ".md")

    @property
    def case(self) -> Path:
        return self.base.with_name(self.base.name + ".json")

    @property
    def extracted_stem(self) -> Path:
        """``<dir>/<stem>`` of the extracted call: ``train.min.py`` -> ``train``."""
        return self.base.with_name(self.base.name.removesuffix(".min"))

    @property
    def data_stem(self) -> str:
        """What data files the result loads are named after (``train.min.<name>.pkl``)."""
        return self.base.name

    @property
    def data_dir(self) -> Path:
        """Where data files a one-file result loads are written."""
        return self.output.parent if self.output.suffix == ".py" else self.output

    @property
    def first_run(self) -> Path:
        """Where the original's first run is kept for ``--resume`` (reducer.kept_first)."""
        return self.base.with_name(self.base.name + ".first")

    def placed(self, files: Mapping[str, str], main: str) -> tuple[Path, dict[Path, str]]:
        """Where each of a result's files goes: one file at the output, or a directory."""
        if len(files) == 1:
            return self.output, {self.output: files[main]}
        return self.directory, {self.directory / rel: text for rel, text in files.items()}

    def ours(self) -> tuple[Path, ...]:
        """The paths a reduction may write at (never a copy of them in a run's sandbox)."""
        return (self.output, self.directory, self.report, self.first_run)


def case_file(result: Path) -> Path:
    """The case file of a result ``verify`` is given (the result, or the case file itself)."""
    result = Path(result)
    if result.suffix == ".json":
        return result
    return OutputLayout(result).case
