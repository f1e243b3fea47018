"""Which artifact runs alone (a reduction's phase after the checks): the one a maintainer
can paste into a bug report, with no file beside it, that fails the same way.

In order: the result, when it loads and reads nothing (checked by running it alone in an
empty directory); else the extracted call, when it loads no ``.pt`` (its check ran it
alone already); else the result with the library's saved call written back as source,
its floating-point tensors drawn afresh and its modules built anew
(``syntax.values.write_back``), when that alone still fails the same way.  A loaded
object that has no source form (a dataset instance, the state at the failing step)
leaves no self-contained artifact, and the report says what each one needs.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from shrinkgpu.reducer.context import Context
from shrinkgpu.reducer.extraction import Extracted
from shrinkgpu.reducer.verification import Verified
from shrinkgpu.signature import Target
from shrinkgpu.syntax.values import write_back
from shrinkgpu.worker import Isolation, Observation, Runner, SandboxError, ScriptSpec

RESULT = "result"
EXTRACTED = "extracted call"
WRITTEN_BACK = "result written back"


@dataclass(frozen=True)
class Alone:
    """The artifact that runs alone, or None; ``checked``: it was run alone in an empty
    directory and failed the same way (else it is known only from what it loads and
    reads); ``because``: why the result itself does not run alone, in words;
    ``text``: the written-back result's text."""

    artifact: str | None
    checked: bool = False
    because: tuple[str, ...] = ()
    text: str | None = None

    def to_json(self, files: dict[str, str]) -> dict:
        return {"artifact": self.artifact, "file": files.get(self.artifact) if self.artifact else None,
                "checked": self.checked, "result_needs": list(self.because)}


def self_contained(ctx: Context, verified: Verified, extracted: Extracted, target: Target,
                   reads: tuple[str, ...], ranks: bool) -> Alone:
    """The artifact that runs alone; ``reads``: the files the result read in its verified
    runs; ``ranks``: the result runs under torchrun (no plain run checks it)."""
    best = verified.best
    texts = best.files
    needs = sorted(set(reads) - set(texts))
    facts = best.program.facts
    because = [f"it is {len(texts)} files" for _ in (0,) if len(texts) > 1]
    loads = [name for name, _cost in facts.loaded if any(name in t for t in texts.values())]
    because += [f"it loads `{name}`" for name in loads]
    state = facts.state
    if state is not None and any(state.state_file in t for t in texts.values()):
        because.append(f"it loads the state at the failing step, `{state.state_file}`")
    because += [f"it reads `{n}`" for n in needs if n not in loads]
    # (not after an interrupt: the user wants out; nor when --max-time leaves no time
    # for the run, which run_alone asks)
    checkable = not ranks and ctx.spec.module is None and verified.stopped != "interrupted"
    text = texts.get(best.program.main)
    if not because and text is not None:
        if not checkable:
            return Alone(RESULT)
        obs = run_alone(ctx, text, target, verified.wall)
        if obs is NOT_RUN:
            return Alone(RESULT)
        if obs is not None and target.matches(obs.signature):
            return Alone(RESULT, checked=True)
        because.append("alone it does not fail the same way"
                       + (f" ({obs.describe()})" if obs is not None else ""))
    extraction = extracted.extraction
    if extraction is not None and extraction.data is None:
        return Alone(EXTRACTED, checked=True, because=tuple(because))
    cut = facts.cut
    if (cut is not None and cut.loads and cut.layout is not None and loads == [cut.loads] and len(because) == 1
            and text is not None and checkable):
        written = write_back(text, cut.loads, *cut.layout)
        if written is not None:
            ctx.talk.stage(f"writing the result without `{cut.loads}`: its saved call as source")
            obs = run_alone(ctx, written, target, verified.wall)
            if obs is NOT_RUN:
                return Alone(None, because=tuple(because))
            if obs is not None and target.matches(obs.signature):
                return Alone(WRITTEN_BACK, checked=True, because=tuple(because), text=written)
            ctx.talk.note(f"the result with the call it loads from `{cut.loads}` written as source (random values "
                          "of the same layouts, modules built anew) did not fail the same way"
                          + (f" ({obs.describe()})" if obs is not None else ""), show=False)
    return Alone(None, because=tuple(because))


# What ``run_alone`` answers when --max-time left no time for the run (said in a note).
NOT_RUN = Observation.infrastructure("not run: --max-time")


def run_alone(ctx: Context, text: str, target: Target, needs: float) -> Observation | None:
    """One run of ``text`` in a fresh interpreter, alone in an empty directory, with the
    script's arguments, environment and stdin (it takes about ``needs``, what the
    result's fresh checks took); None when it could not be run, ``NOT_RUN`` when
    --max-time leaves it no time."""
    slot = ctx.limits.slot("the run alone in an empty directory", max(needs, ctx.limits.fresh_result()),
                           ctx.limits.fresh_timeout)
    if slot.refused:
        ctx.talk.note(f"{slot.refused}: which artifact runs alone is said from what each loads and reads")
        return NOT_RUN
    ctx.talk.stage("running it alone in an empty directory")
    # inside the session, so that a reduction killed here leaves nothing the next one
    # does not sweep
    work = ctx.scratch.alone
    shutil.rmtree(work, ignore_errors=True)
    try:
        work.mkdir(parents=True)
        name = Path(ctx.spec.script_rel).name
        script = work / name
        script.write_text(text, encoding="utf-8")
        spec = ctx.spec
        here = ScriptSpec(script=script, args=spec.args, cwd=work, root=work, env=spec.env, stdin=spec.stdin,
                          argv0=name)
        with Runner(here, isolation=Isolation.FRESH, executors=ctx.executors) as runner:
            runner.start()
            obs = runner.run({name: text}, timeout=slot.timeout)
        if obs.timed_out and ctx.limits.out_of_time():
            # stopped by the end of --max-time: it says nothing of the artifact
            ctx.talk.note(f"the run alone in an empty directory was stopped by --max-time after {obs.wall:.1f}s: "
                          "which artifact runs alone is said from what each loads and reads")
            return NOT_RUN
        return obs
    except (OSError, SandboxError):
        return None
    finally:
        shutil.rmtree(work, ignore_errors=True)

