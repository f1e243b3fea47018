"""Real runs of a script and of its changes, the way the reduction runs the extracted
call's: forked workers of one server, each change with its own variables."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

from shrinkgpu.ablation import Change, Outcome, outcomes
from shrinkgpu.signature import Signature, Strictness, Target
from shrinkgpu.worker import Isolation, Runner, ScriptSpec, Watch


def run_changes(where: Path, name: str, text: str, changes: Callable[[], list[Change]], *,
                summarise: bool = False, **beside: str) -> tuple[Signature, list[Outcome]]:
    """``text`` written as ``where/name`` (with ``beside``'s modules), run once for its
    first error, then each of ``changes()`` once; the same bug is the same class, message
    and operator, as in the reduction's own comparisons.  With ``summarise``, each run
    records what the failing call returned, as the reduction asks of the minimal case's."""
    script = where / name
    script.write_text(text)
    for module, source in beside.items():
        (where / f"{module}.py").write_text(source)
    spec = ScriptSpec(script=script, cwd=where, root=where, argv0=name)
    with Runner(spec, isolation=Isolation.FORK) as runner:
        runner.start()
        first = runner.run({name: text}, timeout=120)
        assert first.signature is not None, first.describe()
        target = dataclasses.replace(Target(first.signature), strictness=Strictness.OPERATOR)
        sig = first.signature
        watch = Watch(output_of=(sig.op.name, sig.call)) if summarise and sig.op and sig.call else None
        found = outcomes(changes(), lambda cs: runner.run_all([(c.files, c.env) for c in cs], at_once=2,
                                                               timeout=120, watch=watch), target)
    return first.signature, found
