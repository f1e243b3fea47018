"""The original and the target (a reduction's first phase): the script run once as the
user runs it, in a fresh interpreter, watched for everything the passes need; again
with synchronous launches when its first error is asynchronous; again (``--confirm``)
when a flaky one passed.  Then the bug to keep, or why there is none."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from shrinkgpu.reducer import resume
from shrinkgpu.reducer import state as state_rules
from shrinkgpu.reducer.config import NotReproduced, ReduceError
from shrinkgpu.reducer.context import Context
from shrinkgpu.reducer.first_run import FirstRun, run_observed
from shrinkgpu.reducer.setup import missing_file_hint
from shrinkgpu.signature import Target, varying_dims
from shrinkgpu.worker import Isolation, Observation, Watch


@dataclass(frozen=True)
class Original:
    """The original's first run as the reduction keeps it, and every fresh run made
    before it (a flaky original may pass the first time)."""

    first: FirstRun
    attempts: tuple[Observation, ...]

    @property
    def observation(self) -> Observation:
        return self.first.observation


def first_watch(ctx: Context) -> Watch:
    """What the first run records: loop iterations (the user's files compiled with a
    counter), the modules to preload, the environment, the shapes of the failing
    operator's calls, and what the options ask for (the library cut, the data objects,
    the raised calls' arguments, the sizes the failing frames read)."""
    config, scratch = ctx.config, ctx.scratch
    # Ranks each build their own shard of the data, model and state: what one saves
    # (the library's call, its data objects, its sizes) is not what a program of several
    # ranks could load back; the call that raised is one process's, and is kept.
    single = ctx.spec.launch.nproc == 1
    return Watch(
        collect_modules=True, collect_env=True, count_loops=True, op_shapes=True,
        cut=str(scratch.call) if config.cut_library and single else None,
        save_objects=str(scratch.objects) if config.save_objects and single else None,
        # a helper's results serve a start from the saved state, which only a run this
        # long gets (in units of its import of torch, as state_rules.long_run decides)
        save_results_after=state_rules.LONG_RUN if config.replay_state and config.write else None,
        keep_raised=str(scratch.raised) if config.extract and config.write else None,
        sizes=config.observed_sizes and single,
    )


def first_key(ctx: Context, original: Original) -> str:
    """What must be unchanged for a kept first run to stand for this one (--resume)."""
    return resume.key_of(ctx.config, ctx.spec, ctx.main_text, original.observation.modules)


def clock_text(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}:{rest:02d}"


def observe_original(ctx: Context) -> Original:
    """The original's first run (or the one --resume finds kept), and the --confirm
    runs a flaky original that passed gets.  A --max-time shorter than the original's
    run, when that is known before anything runs (--resume), is refused."""
    config, talk, limits = ctx.config, ctx.talk, ctx.limits
    watch = first_watch(ctx)
    bound = f" of --max-time {clock_text(config.max_time)}" if config.max_time is not None else ""

    def still_running(elapsed: float) -> None:
        talk.stage(f"the original is still running ({clock_text(elapsed)}{bound}); its first error is what every "
                   "candidate is judged against")

    def observe() -> FirstRun:
        return run_observed(config, isolation=Isolation.FRESH, watch=watch, sandbox=ctx.sandbox,
                            limits=limits, executors=ctx.executors, waiting=(talk.heartbeat, still_running))

    if config.resume:
        refuse_short_limit(ctx, resume.case_seconds(ctx), f"its last reduction's case file, {ctx.layout.case.name}")
        kept = resume.kept_original(ctx, lambda original: first_key(ctx, original))
        if kept is not None:
            refuse_short_limit(ctx, kept.observation.wall, f"its first run kept in {ctx.layout.first_run.name}/")
            limits.paced(kept.observation.startup)
            return kept
    talk.stage("running the original in a fresh interpreter" + (f" (--max-time {clock_text(config.max_time)} "
                                                                  "bounds this run too)" if bound else ""))
    first = observe()
    attempts = [first.observation]
    # A flaky script may pass the first time: the --confirm runs may find its failure.
    while (
        attempts[-1].signature is None
        and not attempts[-1].infra_error
        and not attempts[-1].timed_out
        and len(attempts) <= config.confirm
    ):
        slot = limits.slot("another run of the original (--confirm)", attempts[-1].wall, attempts[-1].wall)
        if slot.refused:
            talk.note(slot.refused)
            break
        talk.stage(f"the original did not fail (run {len(attempts)}); running it again (--confirm)")
        first = observe()
        attempts.append(first.observation)
    # Every decision on how long a run is is taken in units of what this run's
    # interpreter took to import torch: the same on an idle machine and a busy one.
    limits.paced(first.observation.startup)
    return Original(cut_after_its_error(ctx, first), tuple(attempts))


def cut_after_its_error(ctx: Context, first: FirstRun) -> FirstRun:
    """A first run --max-time stopped after its first error left the script (the probe
    was saving what the search needs: the raised calls' arguments, the data objects):
    that error is the original's, the one run that may be judged by it without ending.
    Nothing after it can run; the phases say so, and what there is gets written."""
    obs = first.observation
    reached = obs.raised_before_timeout
    if not (obs.timed_out and reached is not None and ctx.limits.out_of_time()):
        return first
    ctx.talk.note(f"--max-time ended the original's first run after {obs.wall:.0f}s, after its first error "
                  f"({reached.headline}) while it saved what the search needs: nothing after it was run")
    return dataclasses.replace(first, observation=dataclasses.replace(obs, signature=reached))


def refuse_short_limit(ctx: Context, wall: float | None, where: str) -> None:
    """A --max-time shorter than one run of the original, when that run's time is known
    before anything runs, is refused (exit 2): it could only end in the middle of it."""
    max_time = ctx.config.max_time
    if wall is None or max_time is None or max_time >= wall:
        return
    raise ReduceError(
        f"--max-time {max_time:.0f} is shorter than one run of the original ({wall:.0f}s, from {where}): nothing "
        f"could be reduced in it; give --max-time {wall:.0f} at the least, and several times that to reduce it",
        exit_code=2,
    )


def target_of(ctx: Context, original: Original) -> Target:
    """The bug to keep; ``NotReproduced`` (exit 3) when the original did not fail as
    asked, ``ReduceError`` when it could not run."""
    first, config, pattern = original.observation, ctx.config, ctx.pattern
    if first.infra_error:
        raise ReduceError(f"could not run the script: {first.infra_error}")
    if first.timed_out and first.signature is None:
        bound = "--max-time" if ctx.limits.out_of_time() else "--timeout"
        raise NotReproduced(
            f"the original did not finish within {first.wall:.0f}s ({bound}); a script that runs longer needs "
            "a larger --timeout (and --max-time), or a cut of its own that fails sooner",
            first,
        )
    if first.signature is None:
        runs_made = f" in {len(original.attempts)} runs" if len(original.attempts) > 1 else ""
        raise NotReproduced(f"the script did not fail{runs_made}: {first.describe()}", first)
    sig = first.signature
    free = varying_dims(sig.op, first.op_shapes.get(sig.op.name, {})) if sig.op is not None else frozenset()
    target = Target(sig, pattern, config.strictness, config.family, free)
    why = target.mismatch(first.signature)
    if why == "keep-error":
        raise NotReproduced(
            f"the first error does not match --keep-error {pattern.pattern!r}:\n{first.signature.describe()}"
            + missing_file_hint(first.signature, ctx.spec),
            first,
        )
    if why == "family":
        raise NotReproduced(
            f"the first error is not of the family {config.family.key!r} ({config.family.value}):\n"
            f"{first.signature.describe()}",
            first,
        )
    if free:
        ctx.talk.note(varying_note(sig.op.name, free, first.op_shapes.get(sig.op.name, {})))
    return target


def varying_note(op: str, free, seen) -> str:
    """What the report says of the dimensions the original's calls of ``op`` varied."""
    parts = []
    for path, dim in sorted(free):
        sizes = sorted({shape[dim] for shape in seen.get(path, ()) if len(shape) > dim})
        shown = ", ".join(map(str, sizes[:6])) + (", ..." if len(sizes) > 6 else "")
        parts.append(f"dimension {dim} of {path} ({shown})")
    return (
        f"across the original's calls of {op}, " + "; ".join(parts) + " took several sizes: the program varies "
        "them (a sequence a loop grows, a short last batch), so a candidate that fails the same way with another "
        "size there is the same bug; every other dimension stays strict"
    )


def keep_original(ctx: Context, original: Original) -> None:
    """A long first run, kept beside the output for --resume once it is the bug to keep."""
    resume.keep_original(ctx, original, first_key(ctx, original))


def note_how_it_ran(ctx: Context, first: FirstRun) -> None:
    """What the report must say about how the original was run."""
    launch, talk = first.launch, ctx.talk
    if first.surfaced is not None:
        where = first.surfaced.op.name if first.surfaced.op else "a call that is not torch's"
        talk.note(
            f"the first error was asynchronous: without synchronous launches it surfaced at {where}; the "
            f"original was run again with {launch[0]}={launch[1]}, which put it at the operator whose kernel "
            "failed, and every candidate ran that way (timings under it say nothing about speed)",
            show=False,
        )
    elif launch is not None:
        talk.note(
            f"kernel launches were synchronous ({launch[0]}={launch[1]}) for the original and every "
            "candidate: the first error is where the failing kernel was launched",
            show=False,
        )
    if first.note:
        talk.note(first.note, show=False)
    for note in ctx.spec.launch.notes:
        talk.note(note, show=False)
    if ctx.spec.cwd_rel is None:
        # No absolute paths in what goes to a maintainer (field guide, rule 8).
        talk.note(
            "the working directory was outside the script's directory (--root); candidates ran "
            "in a copy of the script's directory as their working directory",
            show=False,
        )
