"""Where a reduction writes: every file beside the result, named from the path asked
for (``OutputLayout``), and every file it keeps for itself while it runs (``Scratch``).

One rule, used by the reducer (what to refuse before any work, what the sandbox leaves
out), the report writer and ``verify``: the result goes to the output path
(``train.min.py``), or, when it needs several files, to a directory of the same name
without ``.py`` (``train.min/``); everything else is named from that *base*:

    train.min.md              the report
    train.min.json            the case file ``verify`` and ``--emit-test`` read
    train.min.<name>.pkl      a data object the result loads (load-saved-objects)
    train.min.state.pt        the state at the failing step the result starts from, with
    train.min.state.json      what it holds and where it was saved (``--resume``), and
    train.min.state.files/    the files the run wrote before that step
    train.min.files/          the files the run wrote before a failure after its loops,
                              which the result copies back in place of those loops
    train.extracted.py        the failing call alone (``.min`` dropped), and its .pt
    train.min.alone.py        the result with the library's saved call written as source,
                              when neither the result nor the extracted call runs alone
    train.min.first/          the original's first run, kept for ``--resume`` (a long one)
    train.call.pt             the arguments of a library's call into the script (named
                              after the script: the program loads it by that name)
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
        """Where the original's first run is kept for ``--resume`` (reducer/resume.py)."""
        return self.base.with_name(self.base.name + ".first")

    @property
    def extracted(self) -> Path:
        """The failing call alone: ``train.min.py`` -> ``train.extracted.py``."""
        return self.extracted_stem.with_name(self.extracted_stem.name + ".extracted.py")

    @property
    def alone(self) -> Path:
        """The result written back as source, without the file it loads (reducer/alone.py)."""
        return self.base.with_name(self.base.name + ".alone.py")

    def object_name(self, name: str) -> str:
        """The file a data object the result loads is saved as (``train.min.train_set.pkl``)."""
        return f"{self.data_stem}.{name}.pkl"

    @property
    def state_name(self) -> str:
        """The state file's name, as the program loads it (beside its main script)."""
        return f"{self.data_stem}.state.pt"

    @property
    def state_files_name(self) -> str:
        """The directory of the files the run wrote before the failing step, as the
        program's restore copies them back."""
        return f"{self.data_stem}.state.files"

    @property
    def written_files_name(self) -> str:
        """The directory of the files the run wrote before a failure after its loops (a
        checkpoint the training saved), as the program copies them back."""
        return f"{self.data_stem}.files"

    @property
    def state(self) -> tuple[Path, Path, Path]:
        """Beside the result: the state, the record of what it holds and where it is from
        (``--resume`` reads it), and the directory of the files the run wrote before it."""
        base = self.data_dir / f"{self.data_stem}.state"
        return (base.with_name(base.name + ".pt"), base.with_name(base.name + ".json"),
                base.with_name(base.name + ".files"))

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


def library_call_name(script: Path) -> str:
    """The file the arguments of a library's call into ``script`` are saved as, beside it
    (the program that makes the call directly loads it by this name)."""
    return f"{Path(script).stem}.call.pt"


@dataclass(frozen=True)
class Scratch:
    """What one reduction keeps for itself while it runs, inside its session directory
    (``Sandbox.session``, removed with it): one name per thing, so that no two runs
    write to the same file."""

    session: Path

    # What the original's first run saved (and ``--resume`` keeps with it).
    FIRST_RUN = ("call.pt", "objects", "raised")

    @property
    def alone(self) -> Path:
        """The empty directory a result is run alone in (reducer/alone.py)."""
        return self.session / "alone"

    @property
    def call(self) -> Path:
        """The library's call into the script, as the first run saved it."""
        return self.session / "call.pt"

    @property
    def objects(self) -> Path:
        """The data objects the first run saved."""
        return self.session / "objects"

    def objects_again(self, n: int) -> Path:
        """The data objects saved again by the ``n``-th rebase that asked for them."""
        return self.session / f"objects-{n}"

    @property
    def raised(self) -> Path:
        """The arguments of the torch calls that raised in the first run."""
        return self.session / "raised"

    @property
    def capture(self) -> Path:
        """The failing call's arguments, saved before it ran by a capture run."""
        return self.session / "capture.pt"

    @property
    def state(self) -> Path:
        """The state at the failing step (and, beside it, ``state.pt.files/``)."""
        return self.session / "state.pt"

    @property
    def state_written(self) -> Path:
        """The files the run that saved the state had written before it (the probe
        copies them beside the state file)."""
        return self.session / "state.pt.files"

    @property
    def written(self) -> Path:
        """The files the original wrote before a failure after its loops (``Watch.written``)."""
        return self.session / "written"

    @property
    def state_progress(self) -> Path:
        """Where the run that saves the state writes the iteration it is in."""
        return self.session / "state-progress"

    @property
    def compile_caches(self) -> Path:
        """The compile caches the original's first forked run left."""
        return self.session / "compile-caches"
