"""The checks after the search (a reduction's phase): the result checked as the user will
run it, in fresh interpreters, falling back to the newest accepted state that reproduces
(``check_result``); and, when it is written elsewhere, from where it is written
(``run_where_written``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from shrinkgpu.core import Outcome
from shrinkgpu.core.rates import RateTest
from shrinkgpu.inputs import InputError, read_source
from shrinkgpu.limits import Limits
from shrinkgpu.oracle import Oracle
from shrinkgpu.reducer.context import Context
from shrinkgpu.results import ReductionResult
from shrinkgpu.signature import Signature, Target
from shrinkgpu.syntax import Candidate, Program
from shrinkgpu.syntax.tidy import tidy
from shrinkgpu.worker import ExecutorFactory, Isolation, Runner, SandboxError, ScriptSpec, default_executor


@dataclass(frozen=True)
class Verified:
    best: Candidate
    counts: tuple[int, int]  # (reproduced, runs) in fresh interpreters
    signature: Signature | None  # a reproducing fresh run's first error
    stopped: str | None  # why the reduction ended early, if it did
    wall: float = 0.0  # the slowest of the result's fresh runs (0: none was made)
    # the files under the run's root the result's own reproducing fresh run read (what
    # it needs beside it); None when no fresh run of it reproduced (not checked, or the
    # fallback to the search's start, known to reproduce before the search)
    reads: tuple[str, ...] | None = None


def check_result(ctx: Context, oracle: Oracle, outcome: Outcome, target: Target,
                 originals: list[str], script: Candidate | None = None) -> Verified:
    """The newest accepted program that reproduces in ``--verify`` fresh runs (the whole
    check skipped, and said, after an interrupt or at --max-time); ``originals``: the
    texts the search started from, whose comments the cleanup keeps only where they
    still describe code; ``script``: the user's program, when the search started
    elsewhere (a cut, the saved state), which no finished search's result may outgrow."""
    talk = ctx.talk
    runs_asked = ctx.config.verify_runs
    if outcome.stopped == "interrupted" and runs_asked:
        # The user wants out: write what we have now, and say it was not re-checked.
        talk.note("interrupted: the result was not re-checked in fresh interpreters", show=False)
        runs_asked = 0
    elif runs_asked and not ctx.limits.affords(ctx.limits.fresh_result()):
        refused = ctx.limits.slot(CHECK, ctx.limits.fresh_result(), ctx.limits.fresh_timeout).refused
        talk.note(f"{refused} ({runs_asked} asked by --verify): the result is written marked partial, not "
                  "re-checked in fresh interpreters")
        runs_asked = 0
    else:
        talk.stage("verifying the result in fresh interpreters")
    # A search stopped early (its budget, --max-time, an interrupt) writes its newest
    # state however large, marked partial: --resume goes on from it, and from the start
    # it chose (the saved state beside it).
    history = no_larger(ctx, outcome.history, script if outcome.stopped is None else None)
    tidied = tidied_of(history[-1], originals)
    if tidied is not None:
        # Comments that no longer describe code go before the check, which then sees the
        # text that is written (its line numbers moved); if it failed, the check falls
        # back to the untidied one.
        history = (*history, tidied)
    try:
        best, counts, signature, wall, reads = verify_history(
            # Shown as they happen too: a result checked fewer times than --verify asks
            # (--max-time), or a fallback, must not be news only in the report.
            history, oracle, target, runs_asked, talk.note, ctx.limits,
        )
    except KeyboardInterrupt:
        talk.note("interrupted while the result was re-checked: it was not verified", show=False)
        return Verified(outcome.history[-1], (0, 0), None, "interrupted")
    return Verified(best, counts, signature, outcome.stopped, wall, reads)


def no_larger(ctx: Context, history: tuple, script: Candidate | None = None) -> tuple:
    """The accepted programs that have no more tokens than the one the search started
    from, nor than ``script`` (the user's program, when the search started elsewhere),
    oldest first.  The search minimises a weighted order (tokens, blocks, loops, files),
    not tokens, and a candidate with fewer blocks may render to more tokens: a result
    larger than its start is no reduction.  A start other than the user's program (the
    saved state, with its restore; the library's call made directly, with its arguments
    written out) may be larger than the program; it is kept for the run it saves, but a
    result that ends larger than the user's script is no reduction either: then the
    script itself is the oldest state, the one the checks fall back to."""
    start = history[0]
    kept = tuple(h for h in history if h.size <= start.size)
    if len(kept) < len(history):
        ctx.talk.note(
            f"{len(history) - len(kept)} accepted program(s) had more tokens than the one the search started "
            f"from ({start.size}), the smallest {min(h.size for h in history if h.size > start.size)}: the "
            + ("result is the newest with no more" if len(kept) > 1 else "search's start is the result")
        )
    if script is None or start.size <= script.size:
        return kept
    smaller = tuple(h for h in kept if h.size <= script.size)
    if not smaller:
        ctx.talk.note(f"the search ended at {kept[-1].size} tokens, more than your script's {script.size} (it "
                      f"started from {start.size}): the result is your script")
    # The script reproduced in the runs before the search: the checks' fallback.
    return (script, *smaller)


def tidied_of(best: Candidate, originals: list[str]) -> Candidate | None:
    """The result with the comments that no longer describe code taken out
    (``syntax.tidy``), or None when there are none."""
    files = {name: tidy(text, originals) if name.endswith(".py") else text for name, text in best.files.items()}
    if files == dict(best.files):
        return None
    return Program(files, best.program.main, facts=best.program.facts).initial()


def written_elsewhere(written: Path, spec: ScriptSpec) -> bool:
    """Whether the result sits where the verification did not run it: another directory
    than the script's (the checks ran it in a copy of the script's directory)."""
    directory = written if written.is_dir() else written.parent
    return directory.resolve() != spec.script.parent.resolve()


def run_where_written(result: ReductionResult, spec: ScriptSpec, target: Target, timeout: float,
                      executors: ExecutorFactory = default_executor) -> str:
    """Run the written result once, fresh, from its own directory (in a copy of it), as
    the report's reproduce line does; say whether it reproduced there."""
    written = result.output
    try:
        if result.run_from is not None:
            # As the printed command runs it: from the working directory that holds the
            # data (a copy of it), the result's files under a directory of their own.
            files = ({rel: read_source(written / rel) for rel in result.files} if written.is_dir()
                     else {result.main: read_source(written)})
            place = Path(".shrinkgpu-result")
            main = written / result.main if written.is_dir() else written
            here = ScriptSpec(script=spec.root_dir / place / (result.main if written.is_dir() else written.name),
                              args=spec.args, cwd=spec.cwd, root=spec.root_dir, env=spec.env, stdin=spec.stdin,
                              argv0=str(main.resolve()), module=spec.module if written.is_dir() else None)
            run = {str(place / (rel if written.is_dir() else written.name)): text for rel, text in files.items()}
        else:
            if written.is_dir():
                script, root, cwd = written / result.main, written, written
            else:
                script, root, cwd = written, written.parent, written.parent
            here = ScriptSpec(script=script, args=spec.args, cwd=cwd, root=root, env=spec.env, stdin=spec.stdin,
                              argv0=script.name if not written.is_dir() else result.main, module=spec.module)
            run = {here.script_rel: read_source(script)}
        with Runner(here, isolation=Isolation.FRESH, executors=executors) as runner:
            runner.start()
            obs = runner.run(run, timeout=timeout)
    except (OSError, SandboxError, InputError) as exc:
        return f"not checked ({exc})"
    if target.matches(obs.signature):
        if result.beside:
            return "reproduces there too, with the data it reads copied beside it"
        if result.run_from is not None:
            return "reproduces there too, run from the directory that holds its data"
        return "reproduces there too"
    missing = ", ".join(result.needs) if result.needs else "files the script reads"
    return (f"does NOT reproduce there ({obs.describe()}); it needs beside it what the checks had: {missing} "
            "(from the script's directory)")


# What --max-time's refusals call one fresh run of the result.
CHECK = "the check of the result in a fresh interpreter"


def verify_history(
    history: tuple, oracle: Oracle, target: Target, runs: int, note: Callable[[str], None],
    limits: Limits | None = None,
) -> tuple[Candidate, tuple[int, int], Signature | None, float, tuple[str, ...] | None]:
    """The newest accepted state that reproduces in every fresh run, with its record, the
    slowest of its runs and the files its reproducing runs read (its own: never another
    state's that the fallback tried).  Each run asks ``limits`` first: one that could not
    end within --max-time is not started, and the check is what ran (said)."""
    if runs <= 0:
        return history[-1], (0, 0), None, 0.0, None

    failures: list[str] = []
    flaky = oracle.rate < 1.0
    walls: dict[int, float] = {}
    reads: dict[int, set[str]] = {}
    cut_short: list[str] = []

    def check(cand: Candidate) -> tuple[int, int, Signature | None]:
        """(reproduced, runs, a reproducing run's signature); ``runs`` in a row must all
        reproduce, or, for a flaky original, the sequential test must find the rate as
        good as the original's."""
        ok, n, sig = 0, 0, None
        test = RateTest(oracle.rate) if flaky else None
        while (n < runs) if test is None else not test.decided:
            timeout = oracle.fresh_timeout
            if limits is not None:
                slot = limits.slot(CHECK, max(walls.get(id(cand), 0.0), limits.fresh_result()), timeout)
                if slot.refused:
                    cut_short.append(slot.refused)
                    break  # --max-time bounds the check too; what ran is what is reported
                timeout = slot.timeout
            obs = oracle.observe(cand.files, isolation=Isolation.FRESH, timeout=timeout)
            if limits is not None and obs.timed_out and limits.out_of_time():
                # stopped by the end of --max-time: no failure of the program, no check
                cut_short.append(f"{CHECK} was stopped by --max-time after {obs.wall:.1f}s")
                break
            n += 1
            if target.matches(obs.signature):
                ok += 1
                sig = obs.signature
                walls[id(cand)] = max(walls.get(id(cand), 0.0), obs.wall)
                reads.setdefault(id(cand), set()).update(obs.reads)
            else:
                failures.append(obs.describe())
                if test is None:
                    break
            if test is not None:
                test.add(target.matches(obs.signature))
        return ok, n, sig

    def read_by(cand: Candidate) -> tuple[str, ...] | None:
        found = reads.get(id(cand))
        return tuple(sorted(found)) if found is not None else None

    def good(ok: int, n: int) -> bool:
        if not failures and ok == n and n:
            return True  # cut short by --max-time after reproducing every time it ran
        return ok == runs if not flaky else RateTest.judge(oracle.rate, ok, n)

    ok, n, sig = check(history[-1])
    if good(ok, n):
        if n < runs and not flaky:
            note(f"--max-time cut the check short: the result reproduced in the {n} fresh run(s) made "
                 f"({cut_short[0]})")
        return history[-1], (ok, n), sig, walls.get(id(history[-1]), 0.0), read_by(history[-1])
    if not n:
        note(f"{cut_short[0]}: the result is written marked partial, not re-checked in fresh interpreters")
        return history[-1], (0, 0), None, 0.0, None
    note(
        f"the smallest candidate reproduced in {ok} of {n} fresh runs ({failures[0]}); "
        "fell back to the newest larger candidate that reproduces "
        + ("as often as the original" if flaky else "every time")
    )
    # history[0] is the original, known to reproduce; search for the newest good state.
    sig = target.signature
    lo, hi = 0, len(history) - 1  # lo good, hi bad
    counted = (runs, runs)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        mid_ok, mid_n, mid_sig = check(history[mid])
        if not mid_n:
            note(f"{cut_short[-1]}: the fallback stopped at the newest program known to reproduce")
            break
        if good(mid_ok, mid_n):
            lo, sig, counted = mid, mid_sig, (mid_ok, mid_n)
        else:
            hi = mid
    return history[lo], counted, sig, walls.get(id(history[lo]), 0.0), read_by(history[lo])
