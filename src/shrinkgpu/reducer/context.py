"""What every phase of one reduction reads: the config, how the script is run, where
things are written, the sandbox every run copies, how to say something and the limits.

A ``Context`` is made once, by ``Reduction.prepare``, and handed to each phase with the
values the phases before it returned; a phase never sets anything on it.  Its two
mutable members have one owner each: ``talk`` collects what is said (in order), and
``limits`` counts tests and follows the candidates' time limit.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from shrinkgpu.layout import OutputLayout, Scratch
from shrinkgpu.limits import Limits
from shrinkgpu.reducer.config import ReduceConfig
from shrinkgpu.reducer.events import Talk
from shrinkgpu.worker import ExecutorFactory, Executors, Isolation, Runner, Sandbox, ScriptSpec


@dataclass(frozen=True)
class Context:
    config: ReduceConfig
    spec: ScriptSpec  # how the user runs the script (after the first run: with what it settled)
    layout: OutputLayout
    sandbox: Sandbox  # one copy of the user's directory for every run
    talk: Talk
    limits: Limits
    executors: ExecutorFactory
    pattern: re.Pattern | None  # --keep-error, compiled
    main_text: str  # the main script's text, as Python reads it
    # where the runs' files go when not in the session directory itself (the smaller
    # world a distributed reduction moved to: reducer/world.py)
    scratch_root: Path | None = None

    def __post_init__(self) -> None:
        # (a plain function is a factory of this machine's capacity)
        object.__setattr__(self, "executors", Executors.of(self.executors))

    @property
    def scratch(self) -> Scratch:
        return Scratch(self.scratch_root or self.sandbox.session)

    @property
    def writing(self) -> bool:
        return self.config.write

    def with_spec(self, spec: ScriptSpec) -> "Context":
        """The context every run after the first one sees (synchronous launches)."""
        return dataclasses.replace(self, spec=spec)

    def runner(self, isolation: Isolation, *, program_files: Iterable[str] = (), threads: int | None = None,
               lanes: int = 1) -> Runner:
        """A runner of this reduction's spec and sandbox (the caller starts and closes it)."""
        return Runner(self.spec, program_files=program_files, isolation=isolation, keep_temp=self.config.keep_temp,
                      sandbox=self.sandbox, threads=threads, lanes=lanes, executors=self.executors)
