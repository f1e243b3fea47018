"""What one change of the ablation is, and what came of running it.

A change is a new text of the minimal case or of the extracted call (and, for some, a
variable in the environment), made by one of the modules beside this one; the caller
runs it once in its own process and compares its first error with the bug's.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Callable, Mapping

from shrinkgpu.signature import Target
from shrinkgpu.worker import Observation

__all__ = ["BACKEND", "CALL", "CASE", "CATEGORIES", "Change", "DATA", "DEVICE", "DIFFERENT", "EXTENSION", "LAYOUT",
           "Outcome", "PASSES", "PRECISION", "SAME", "SIZE", "SYNC", "diff_of", "outcome_of", "outcomes", "OUTPUT_MARK"]

# What a change varies, in the field guide's order: one explanation each.
DATA, LAYOUT, PRECISION, DEVICE, BACKEND, EXTENSION, SIZE, SYNC = (
    "data", "layout", "precision", "device", "backend", "extension", "size", "synchronous launches")
CATEGORIES = (DATA, LAYOUT, PRECISION, DEVICE, BACKEND, EXTENSION, SIZE, SYNC)
CASE, CALL = "the minimal case", "the extracted call"
SAME, PASSES, DIFFERENT = "same bug", "passes", "fails differently"
# the line a changed extracted call prints with its result's summary (ablation.call)
OUTPUT_MARK = "shrinkgpu-output: "


@dataclass(frozen=True)
class Change:
    name: str  # what was changed, as code or in a word: ``backend="eager"``, ``target.clamp(0, 3)``
    what: str  # what the change tests, in words
    files: Mapping[str, str]
    category: str = BACKEND
    subject: str = CASE
    edit: str = ""  # the change as a short diff of the text it was made on
    env: Mapping[str, str] = field(default_factory=dict)  # variables the run sets (or, as "", clears)


@dataclass(frozen=True)
class Outcome:
    change: str
    what: str
    result: str  # "same bug" | "passes" | "fails differently"
    error: str | None = None  # the first error of a run that failed differently
    category: str = BACKEND
    subject: str = CASE
    edit: str = ""
    output: str | None = None  # a passing extracted call's result: "float32[8] all finite"

    def to_json(self) -> dict:
        return {"change": self.change, "what": self.what, "outcome": self.result, "result": self.result,
                "error": self.error, "category": self.category, "subject": self.subject, "edit": self.edit,
                "output": self.output}


def diff_of(before: Mapping[str, str], after: Mapping[str, str]) -> str:
    """The lines a change removed (``-``) and added (``+``), without context: what the
    report shows beside the outcome."""
    out: list[str] = []
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name, ""), after.get(name, "")
        if old == new or not name.endswith(".py"):
            continue
        for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0):
            if line.startswith(("---", "+++", "@@")):
                continue
            out.append(f"{line[0]} {line[1:]}")
    return "\n".join(out)


def _output(stdout: str) -> str | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith(OUTPUT_MARK):
            return line[len(OUTPUT_MARK):].strip()
    return None


def outcome_of(change: Change, obs: Observation, target: Target) -> Outcome:
    kept = dict(what=change.what, category=change.category, subject=change.subject, edit=change.edit)
    if target.matches(obs.signature):
        return Outcome(change.name, result=SAME, **kept)
    if (obs.signature is None and not obs.timed_out and not obs.infra_error and obs.signal is None
            and obs.exit_code in (0, None)):
        # (the extracted call prints its result; a whole program's run records the
        # result of the call that failed in the original: ``Watch.output_of``)
        return Outcome(change.name, result=PASSES, output=_output(obs.stdout) or obs.output, **kept)
    return Outcome(change.name, result=DIFFERENT, error=obs.describe(), **kept)


def outcomes(changes: list[Change], run: Callable[[list[Change]], list[Observation]],
             target: Target) -> list[Outcome]:
    """Each change run once (``run`` takes the changes and runs them, in parallel as it
    can, each in its own process)."""
    if not changes:
        return []
    observed = run(changes)
    return [outcome_of(c, obs, target) for c, obs in zip(changes, observed)]
