"""The fewest ranks (a distributed reduction's phase after the target): a script the user
runs as N ranks is run with one rank, then two, before the search, each in fresh
interpreters with torchrun's environment; the first that fails with the same bug is the
world size every candidate runs with, and its run stands for the original's (the facts
the passes read: its loops, its shapes, the call that raised).

A bad label in one rank's shard is on the one rank's only shard too, and then the search
runs one process per candidate, not N; a collective that needs a peer keeps two; one
that needs the user's N keeps N.  Each smaller world runs with a scratch directory of
its own, so a world that fails otherwise leaves the original's files untouched.
"""

from __future__ import annotations

import dataclasses

from shrinkgpu.launch import PLAIN
from shrinkgpu.reducer.context import Context
from shrinkgpu.reducer.original import Original, first_watch
from shrinkgpu.signature import Target
from shrinkgpu.worker import Isolation

# The world sizes tried before the user's, smallest first.
SMALLER_WORLDS = (1, 2)


def own_ranks(ctx: Context, original: Original) -> Context:
    """A script that started ranks of its own in its first run: every later run knows it
    (how they start; candidates fork spawned ranks from a copy of themselves), and the
    user hears which rank failed first."""
    first = original.observation
    if first.launcher is None or ctx.spec.launch.ranks:
        return ctx
    methods = {child.get("method") for child in first.children}
    fresh = sum(1 for child in first.children if child.get("method") in ("spawn", "forkserver"))
    launch = dataclasses.replace(ctx.spec.launch, starter=first.launcher, fresh_children=fresh)
    which = f"rank {first.rank} of {first.world_size}" if first.rank is not None else f"{first.world_size} ranks"
    ctx.talk.note(f"the script starts its own ranks ({first.launcher}, {', '.join(sorted(m for m in methods if m))}): "
                  f"the first error is {which}'s; each candidate's ranks are "
                  + ("forked from a copy of it made before the script ran" if launch.fresh_children else
                     "forked as the script forks them"))
    return dataclasses.replace(ctx, spec=dataclasses.replace(ctx.spec, launch=launch))


def fewest_ranks(ctx: Context, original: Original, target: Target) -> tuple[Context, Original]:
    """The context and the original of the smallest world that fails the same way (the
    user's own when none smaller does)."""
    launch = ctx.spec.launch
    if not launch.ranks or launch.nproc == 1:
        return ctx, original
    first = original.observation
    for n in SMALLER_WORLDS:
        if n >= launch.nproc:
            break
        ranks = f"{n} rank{'s' if n > 1 else ''}"
        # (a world of fewer ranks runs the same program: about the original's time)
        slot = ctx.limits.slot(f"the check of the original with {ranks}", first.wall,
                               ctx.limits.fresh_limit(first.wall))
        if slot.refused:
            ctx.talk.note(f"{slot.refused}: candidates keep {launch.nproc} ranks")
            break
        spec = dataclasses.replace(ctx.spec, launch=launch.with_nproc(n))
        smaller = dataclasses.replace(ctx, spec=spec, scratch_root=ctx.sandbox.session / f"world-{n}")
        smaller.scratch.session.mkdir(parents=True, exist_ok=True)
        ctx.talk.stage(f"checking in fresh interpreters whether {ranks} fail the same way as {launch.nproc}")
        with smaller.runner(Isolation.FRESH) as fresh:
            fresh.start()
            future = fresh.submit({spec.script_rel: ctx.main_text}, timeout=slot.timeout,
                                  watch=first_watch(smaller))
            obs = ctx.talk.wait(future, f"the original with {n} rank{'s' if n > 1 else ''} is still running")
        if not target.matches(obs.signature):
            ctx.talk.note(f"with {n} rank{'s' if n > 1 else ''} the original does not fail the same way "
                          f"({obs.describe()}): candidates keep {launch.nproc if n == SMALLER_WORLDS[-1] else 'more'}",
                          show=False)
            continue
        ctx.talk.note(f"with {n} rank{'s' if n > 1 else ''} the original fails the same way as with "
                      f"{launch.nproc} ({obs.describe()}): every candidate runs {n} rank{'s' if n > 1 else ''}")
        run = dataclasses.replace(original.first, observation=obs, spec=spec)
        return smaller, Original(run, (obs,))
    return ctx, original


def without_ranks(ctx: Context, verified, target: Target, main: str):
    """How the verified result runs: as plain ``python`` when it fails the same way
    without torchrun's ranks, each of ``--verify`` fresh runs (then the report says
    "reproduces without torch.distributed"); else as the ranks it was reduced with."""
    launch = ctx.spec.launch
    if not launch.ranks or not verified.counts[0]:
        return launch
    spec = dataclasses.replace(ctx.spec, launch=PLAIN)
    plain = dataclasses.replace(ctx, spec=spec)
    runs = max(1, ctx.config.verify_runs)
    what = "the check of the result as one plain python process"
    # Each run asks first: it takes about what the result's fresh checks took.
    needs = verified.wall
    slots = [ctx.limits.slot(what, needs, ctx.limits.fresh_timeout)]
    if slots[0].refused:
        ctx.talk.note(f"{slots[0].refused}: the result runs with torchrun's ranks")
        return launch
    ctx.talk.stage("checking whether the result fails the same way as one plain python process")
    with plain.runner(Isolation.FRESH) as fresh:
        fresh.start()
        for k in range(runs):
            slot = slots[0] if k == 0 else ctx.limits.slot(what, needs, ctx.limits.fresh_timeout)
            if slot.refused:
                ctx.talk.note(f"{slot.refused}: the result runs with torchrun's ranks")
                return launch
            obs = fresh.run(dict(verified.best.files), timeout=slot.timeout)
            if not target.matches(obs.signature):
                ctx.talk.note(f"the result needs torchrun's ranks: as one plain python process it "
                              f"{'fails otherwise' if obs.signature else 'does not fail'} ({obs.describe()})",
                              show=False)
                return launch
    ctx.talk.note(f"reproduces without torch.distributed: the result fails the same way as one plain python process "
                  f"({runs} fresh run{'s' if runs > 1 else ''}), without torchrun")
    return PLAIN
