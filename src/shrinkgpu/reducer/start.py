"""Where the search starts (a reduction's phase before the workers): the original, or,
for an original of 10 s or more, a program that skips the steps before its failure.

* **The saved state.**  An original that failed past the first iteration of a loop is
  run once more, saving its state at the start of the failing iteration (weights,
  optimizer, RNGs, the batch; reducer/state.py says where); a fresh interpreter then
  runs the program started there, and only when it fails with the same bug does the
  search start from it.  The same run captures the failing call when extraction needs
  it (reducer/extraction.py): one run of the original, not two.
* **A cut.**  An original that no saved state replays still spends every candidate's
  run on the steps before the failure until a pass cuts them.  So the cuts that drop
  those steps are tried here first, each in a fresh interpreter (``START_CUTS``: the
  library's call into the user's code made directly, which a failure inside
  ``Trainer.fit`` needs none of the steps for; the original without the loops that took
  its time; those loops cut to their first iteration); the first that fails the same way
  in less time is where the search starts.  The library's cut is tried before the run
  that would save the state: it needs no state.
* **The files the loops wrote.**  A failure after the loops that reads what they wrote
  (the best checkpoint, loaded after training) fails otherwise without them: the original
  is run once more keeping the files it writes, and the original without those loops,
  the files copied back in their place, is the start when it fails the same way
  (``written_start``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from shrinkgpu.passes import CallPastTheLibrary, CutHotLoops, DeleteNeverRan, ReplayFromState, put_back_text
from shrinkgpu.reducer import resume
from shrinkgpu.reducer import state as state_rules
from shrinkgpu.reducer.context import Context
from shrinkgpu.reducer.facts import Input, RunFacts
from shrinkgpu.reducer.pool import WorkerPlan
from shrinkgpu.reducer.state import StatePoint, describe_left, state_point, state_record
from shrinkgpu.signature import Target
from shrinkgpu.syntax import Candidate, Edit, Program
from shrinkgpu.syntax.facts import loop_header
from shrinkgpu.worker import Capture, Isolation, Observation, Runner, Watch

# A start that takes more than this share of the original's run skips too little to be
# worth the file it loads (or the cut it makes).
SLOWER_REPLAY = 0.7
# The cuts a long original with no replayable state is started from, in order:
# (preparation, cut, its level, what it is).  The preparation's first unit, when it offers
# one, goes first: a statement after the failure (``trainer.save_model(...)``) reads the
# trainer too and would keep it alive when the library's call is made directly.  A loop
# cut to its first iteration still writes what the statements after it read (the first
# epoch saves the best checkpoint so far): a start that needs no file, tried before the
# one that puts back the files the loop wrote (``written_start``).
START_CUTS = (
    (DeleteNeverRan(), CallPastTheLibrary(), 0, "the library's call into your code made directly"),
    (None, CutHotLoops(), 0, "the loops that took its time cut"),
    (None, CutHotLoops(), 1, "the loops that took its time cut to their first iteration"),
)
# The first of them, the only one that needs no step before the failure: tried before
# the run that would save the state.
LIBRARY_START = START_CUTS[:1]


@dataclass(frozen=True)
class Start:
    """Where the search starts: ``program`` (None: the original itself), what it is, how
    long its fresh run took, the run facts every later program carries (with the state
    at the failing step when the start loads it), the files beside it by the name it
    loads them by, and the cuts already checked."""

    program: Program | None
    what: str
    wall: float
    facts: RunFacts
    data_files: dict[str, Path] = dataclasses.field(default_factory=dict)
    tried: frozenset[str] = frozenset()

    @property
    def state(self):
        return self.facts.state


def point_text(point: StatePoint) -> str:
    """Where the state is saved, in words."""
    call = f", in call {point.call} of the function that holds it" if point.call > 1 else ""
    return f"iteration {point.iteration} of `{point.header_text}` ({point.file}{call})"


def cut_with(initial: Candidate, prepare, cut, level: int = 0) -> Candidate | None:
    """``initial`` with the first unit of ``prepare`` (when it offers one), then the
    first of ``cut`` at ``level``; None when ``cut`` offers none."""
    cand = initial
    first = next(iter(prepare.units(cand, 0) or []), None) if prepare is not None else None
    if first is not None:
        cand = cand.with_edits(first)
    unit = next(iter(cut.units(cand, level) or []), None)
    return cand.with_edits(unit) if unit is not None else None


def start_point(ctx: Context, first: Observation, target: Target, inp: Input, plan: WorkerPlan,
                capture: Capture | None) -> tuple[Start, Observation | None]:
    """Where the search starts, and the run that captured the failing call (``capture``:
    what extraction asked of the run before the search; None when none was made)."""
    start = Start(None, "the original", first.wall, inp.facts)
    point = state_point_of(ctx, first, inp)
    resumed = resume.kept_state(ctx, point) if point is not None and ctx.config.resume else None
    if point is not None and resumed is None and inp.facts.cut is not None:
        cut = cut_start(ctx, first, target, inp, plan, start, LIBRARY_START)
        if cut is not start:
            # The library's call into the user's code, made directly, needs none of the
            # steps before the failure: no state to save, and no run of the original for it.
            ctx.talk.note(f"no state is saved at {point_text(point)}: the search starts from {cut.what}", show=False)
            start, point = cut, None
    saving = point is not None and resumed is None
    captured = None
    if saving or capture is not None or resumed is not None:
        with ctx.runner(Isolation.FRESH, program_files=inp.files) as fresh:
            fresh.start()
            if saving or capture is not None:
                obs = once_more(ctx, fresh, first, inp, plan, capture, point if saving else None)
                captured = obs if capture is not None else None
                if saving and obs is not None:
                    start = checked_state(ctx, fresh, first, target, inp, plan, point, ctx.scratch.state,
                                          obs.state, obs) or start
            if resumed is not None:
                saved, path = resumed
                start = checked_state(ctx, fresh, first, target, inp, plan, point, path, saved) or start
    if start.program is None:
        start = cut_start(ctx, first, target, inp, plan, start, START_CUTS)
    if start.program is None:
        start = written_start(ctx, first, target, inp, plan, start)
    return start, captured


def state_point_of(ctx: Context, first: Observation, inp: Input) -> StatePoint | None:
    """Where to save the state, when saving it pays (a long original that failed past
    the first iteration of a loop); the reason not to, said, when it would have."""
    config, talk = ctx.config, ctx.talk
    if not (config.replay_state and config.write) or not state_rules.long_run(first.wall, ctx.limits):
        return None
    if ctx.spec.launch.nproc > 1:
        talk.note("no state was saved to start candidates at the failing step: each of the ranks holds its own, "
                  "and a program of several ranks cannot load one rank's", show=False)
        return None
    point = state_point(first, inp.files, inp.main, inp.facts.hot_loops)
    if isinstance(point, str):
        talk.note(f"no state was saved to start candidates at the failing step: {point}", show=False)
        return None
    # The run that saves it takes about the original's time (it traces only the frame of
    # the loop, and stops at the failing iteration) and less than the first run, which
    # traced every line; the check of the replay takes less than one more.
    if not ctx.limits.affords((1.0 + SLOWER_REPLAY) * first.wall):
        slot = ctx.limits.slot(f"the run that saves the state at {point_text(point)}, and the check of the "
                               "replay", (1.0 + SLOWER_REPLAY) * first.wall, first.wall)
        talk.note(f"no state was saved to start candidates at the failing step: {slot.refused}")
        return None
    return point


def once_more(ctx: Context, fresh: Runner, first: Observation, inp: Input, plan: WorkerPlan,
              capture: Capture | None, point: StatePoint | None) -> Observation | None:
    """The original run once more in a fresh interpreter, saving the state at ``point``
    and capturing the failing call (``capture``), whichever are asked; None (and said)
    when --max-time leaves it too little time."""
    scratch = ctx.scratch
    watch = Watch(capture=capture, state=point.watch(scratch.state, scratch.state_progress) if point else None)
    what = [f"saving the state at {point_text(point)}" if point else "",
            "capturing the failing call" if capture is not None else ""]
    doing = " and ".join(w for w in what if w)
    slot = ctx.limits.slot(f"the run of the original {doing}", first.wall, ctx.limits.fresh_limit(first.wall))
    if slot.refused:
        ctx.talk.note(slot.refused)
        return None
    ctx.talk.stage("running the original once more: " + doing)
    future = fresh.submit(inp.files, timeout=slot.timeout, watch=watch, env=plan.first_device)
    return ctx.talk.wait(future, "the original is still running",
                         (lambda: how_far(scratch.state_progress, point)) if point else None)


def how_far(progress: Path, point: StatePoint) -> str:
    """How far the run that saves the state is from it, from what the probe last wrote."""
    try:
        seen = tuple(int(n) for n in progress.read_text(encoding="utf-8").split(","))
    except (OSError, ValueError):
        return ""
    if not seen or len(seen) != len(point.iterations):
        return ""
    goal = tuple(it for _h, it in point.iterations)
    if len(seen) == 1:
        return f", iteration {seen[0]} of `{point.header_text}`; the state is saved at iteration {goal[0]}"
    return f", iterations {seen} of the loops around the failure; the state is saved at {goal}"


def cut_start(ctx: Context, first: Observation, target: Target, inp: Input, plan: WorkerPlan, start: Start,
              cuts) -> Start:
    """The first of ``cuts`` (not checked before) that fails the same way in a fresh
    interpreter in less time than the original, as the start; else ``start`` (with the
    cuts it checked)."""
    if start.program is not None or not state_rules.long_run(first.wall, ctx.limits):
        return start
    talk = ctx.talk
    initial = inp.program.initial()
    tried = set(start.tried)
    with ctx.runner(Isolation.FRESH, program_files=inp.files) as fresh:
        fresh.start()
        for prepare, cut, level, what in cuts:
            cand = None if what in tried else cut_with(initial, prepare, cut, level)
            tried.add(what)
            if cand is None:
                continue
            # A cut that runs longer is refused anyway (SLOWER_REPLAY): one that does
            # not fail at the call goes on with the rest of the program, and must not
            # cost a whole run of the original.
            limit = min(ctx.limits.fresh_limit(first.wall), SLOWER_REPLAY * first.wall)
            slot = ctx.limits.slot(f"the start from the original with {what}", SLOWER_REPLAY * first.wall, limit)
            if slot.refused:
                talk.note(slot.refused)
                continue
            talk.stage(f"checking in a fresh interpreter whether {what} fails the same way")
            obs = talk.wait(fresh.submit(cand.files, timeout=slot.timeout, env=plan.first_device),
                            f"the original with {what} is still running")
            if not target.matches(obs.signature):
                talk.note(f"the original with {what} does not fail the same way ({obs.describe()})", show=False)
                continue
            if obs.wall > SLOWER_REPLAY * first.wall:
                talk.note(f"the original with {what} fails the same way, but in {obs.wall:.1f}s of the "
                          f"original's {first.wall:.1f}s", show=False)
                continue
            talk.note(f"the original with {what} fails the same way in a fresh interpreter in "
                      f"{obs.wall:.1f}s (the original: {first.wall:.1f}s): the search starts there")
            return Start(inp.facts.program(cand.files, inp.main, obs), f"the original with {what}", obs.wall,
                         inp.facts, tried=frozenset(tried))
    return dataclasses.replace(start, tried=frozenset(tried))


# What a start without the loops puts back of what they wrote, in words.
WRITTEN_CUT = "the loops that took its time cut and the files they wrote put back"
# Files a result copies back that hold weights or pickled objects: the user's, not for a
# public issue.
_WEIGHTS = (".pt", ".pth", ".ckpt", ".bin", ".safetensors", ".pkl", ".pickle", ".npz", ".h5")


def put_back_cut(initial: Candidate, files_dir: str, main: str) -> Candidate | None:
    """``initial`` with its hottest loop that the failure is not in deleted, as the cut
    start deletes it, and in its place the statement that copies ``files_dir`` (what the
    run wrote) back into the working directory: the statements after the loop read them
    (``model.load_state_dict(torch.load("model.pt"))``).  None when the hottest loop is
    the one the failure is in, or it is not in the main script's directory (the copy
    names its directory from ``__file__``)."""
    unit = next(iter(CutHotLoops().units(initial, 0) or []), None)
    if unit is None:
        return None
    program = initial.program
    hot = {(f, h) for f, h, _share in program.facts.hot_loops}
    loops = [e for e in unit if e.op == "delete" and program.stmts[e.stmt].kind in ("for", "while")
             and (program.stmts[e.stmt].file, loop_header(program.stmts[e.stmt].node)) in hot]
    if not loops:
        return None
    first = program.stmts[loops[0].stmt]
    if Path(first.file).parent != Path(main).parent:
        return None
    text = put_back_text(files_dir, program.texts.get(first.file, ""))
    return initial.with_edits(tuple(Edit("replace", e.stmt, text=text) if e is loops[0] else e for e in unit))


def written_start(ctx: Context, first: Observation, target: Target, inp: Input, plan: WorkerPlan,
                  start: Start) -> Start:
    """For a long original whose failure comes after the loops that took its time and
    reads what they wrote (a checkpoint saved on the best validation, then loaded): the
    original once more, keeping the files it writes, then the original with those loops
    cut and the files put back in their place, in a fresh interpreter; the start when
    that fails the same way in less time.  Else ``start``, and the note says why."""
    config, talk, spec = ctx.config, ctx.talk, ctx.spec
    if (start.program is not None or not (config.replay_state and config.write) or ctx.spec.launch.nproc > 1
            or not state_rules.long_run(first.wall, ctx.limits)):
        return start
    name = ctx.layout.written_files_name
    cand = put_back_cut(inp.program.initial(), name, inp.main)
    if cand is None:
        return start
    main_dir = Path(spec.script_rel).parent
    if (spec.root_dir / main_dir / name).exists():
        talk.note(f"the original with {WRITTEN_CUT} was not tried: a file of yours is named {name}", show=False)
        return start
    # The run that keeps the files, then the check of the start: about 1.7 runs.
    slot = ctx.limits.slot(f"the start from the original with {WRITTEN_CUT} (the run that keeps the files, then "
                           "its check)", (1.0 + SLOWER_REPLAY) * first.wall, ctx.limits.fresh_limit(first.wall))
    if slot.refused:
        talk.note(slot.refused)
        return start
    kept = ctx.scratch.written
    with ctx.runner(Isolation.FRESH, program_files=inp.files) as fresh:
        fresh.start()
        talk.stage("running the original once more: keeping the files it writes")
        obs = talk.wait(fresh.submit(inp.files, timeout=slot.timeout, env=plan.first_device,
                                     watch=Watch(written=str(kept))), "the original is still running")
        written = obs.written or {}
        files = [f for f in written.get("files") or () if (kept / f).is_file()]
        if not target.matches(obs.signature):
            talk.note(f"the run that was to keep the files the original writes failed otherwise ({obs.describe()})")
            return start
        if not files:
            why = written.get("files_error") or "it wrote none"
            talk.note(f"the original with {WRITTEN_CUT} was not tried: {why}", show=False)
            return start
        for f in files:
            ctx.sandbox.add_file(str(main_dir / name / f), kept / f)
        limit = min(ctx.limits.fresh_limit(first.wall), SLOWER_REPLAY * first.wall)
        slot = ctx.limits.slot(f"the check of the start from the original with {WRITTEN_CUT}",
                               SLOWER_REPLAY * first.wall, limit)
        if slot.refused:
            talk.note(slot.refused)
            return start
        talk.stage(f"checking in a fresh interpreter whether the original with {WRITTEN_CUT} fails the same way")
        check = talk.wait(fresh.submit(cand.files, timeout=slot.timeout, env=plan.first_device),
                          f"the original with {WRITTEN_CUT} is still running")
    if not target.matches(check.signature):
        talk.note(f"the original with {WRITTEN_CUT} does not fail the same way ({check.describe()})")
        return start
    if check.wall > SLOWER_REPLAY * first.wall:
        talk.note(f"the original with {WRITTEN_CUT} fails the same way, but in {check.wall:.1f}s of the original's "
                  f"{first.wall:.1f}s", show=False)
        return start
    size = written.get("files_bytes", sum((kept / f).stat().st_size for f in files))
    shown = ", ".join(files[:3]) + (", ..." if len(files) > 3 else "")
    weights = [f for f in files if f.lower().endswith(_WEIGHTS)]
    held = (f"; {', '.join(weights[:3])} hold{'s' if len(weights) == 1 else ''} your weights or data: attach the "
            f"extracted call to a public issue, not {name}/" if weights else "")
    talk.note(f"the original with {WRITTEN_CUT} fails the same way in a fresh interpreter in {check.wall:.1f}s "
              f"(the original: {first.wall:.1f}s): the search starts there. If the result keeps the copy, {name}/ "
              f"goes beside it: {len(files)} file(s) the run wrote ({shown}, {size / 2**20:.1f} MiB){held}")
    return Start(inp.facts.program(cand.files, inp.main, check), f"the original with {WRITTEN_CUT}", check.wall,
                 inp.facts, {name: kept}, tried=start.tried | {WRITTEN_CUT})


def checked_state(ctx: Context, fresh: Runner, first: Observation, target: Target, inp: Input, plan: WorkerPlan,
                  point: StatePoint, path: Path, saved: dict | None, obs: Observation | None = None) -> Start | None:
    """The start at the saved state, when a fresh interpreter started there fails with the
    same bug; else None, and the note says why.  ``saved``: what the probe said it saved
    (at ``path``); ``obs``: the run that saved it (None: the state --resume found)."""
    where = point_text(point)

    def refuse(why: str) -> None:
        ctx.talk.note(f"the state at {where} is not used: {why}")

    if saved is None:
        return refuse(f"the run that was to save it never reached that iteration ({obs.describe()})")
    if saved.get("error") or not path.is_file():
        return refuse(f"it could not be saved: {saved.get('error') or 'no file was written'}")
    if obs is not None and not target.matches(obs.signature):
        return refuse(f"the run that saved it failed otherwise ({obs.describe()})")
    placed = place_state(ctx, path, saved, point)
    if isinstance(placed, str):
        return refuse(placed)
    name, record, files_src, written = placed
    facts = dataclasses.replace(inp.facts, state=record)
    program = facts.program(inp.files, inp.main, first)
    tried = []
    # Level 1 keeps every loop but the one the state was saved in: it skips iterations
    # only when some loop around the failure was past its first one.
    skips = any(iteration > 0 for _header, iteration in point.iterations)
    for level in (0, 1) if skips else (0,):
        for unit in ReplayFromState().units(program.initial(), level) or []:
            files = program.initial().with_edits(unit).files
            # (a replay worth starting from runs in less than SLOWER_REPLAY of the original)
            slot = ctx.limits.slot(f"the check of the start at {where}", SLOWER_REPLAY * first.wall,
                                   ctx.limits.fresh_limit(first.wall))
            if slot.refused:
                return refuse(slot.refused)
            ctx.talk.stage(f"checking in a fresh interpreter that starting at {where} fails the same way")
            replay = ctx.talk.wait(fresh.submit(files, timeout=slot.timeout, env=plan.first_device),
                                   "the replay is still running")
            if target.matches(replay.signature) and replay.wall > SLOWER_REPLAY * first.wall:
                tried.append(f"it fails the same way, but in {replay.wall:.1f}s of the original's {first.wall:.1f}s")
                continue
            if target.matches(replay.signature):
                data_files = {name: path, **({record.files_dir: files_src} if record.files_dir else {})}
                resume.keep_state(ctx, point, saved, path, files_src if record.files_dir else None)
                size = saved.get("bytes", path.stat().st_size)
                files_note = ""
                if record.files_dir:
                    shown = ", ".join(written[:3]) + (", ..." if len(written) > 3 else "")
                    files_note = (f"; with {len(written)} file(s) the run wrote before it: {shown}, "
                                  f"{saved.get('files_bytes', 0) / 2**20:.1f} MiB in {record.files_dir}")
                ctx.talk.note(
                    f"the state at {where} ({len(record.entries)} objects, {size / 2**20:.1f} MiB{files_note}) "
                    f"replays the bug in a fresh interpreter in {replay.wall:.1f}s (the original: "
                    f"{first.wall:.1f}s): candidates may start there. If the result keeps it, it loads {name}, "
                    "which holds your weights: attach the extracted call to a public issue, not that file"
                )
                # The program the search starts from: its own text, with the facts of its
                # fresh run (its failing lines), and what the original's run showed.
                return Start(facts.program(files, inp.main, replay), "the program started at the failing step",
                             replay.wall, facts, data_files)
            tried.append(replay.describe())
    if not tried:
        return refuse("the loop's body cannot be run on its own here")
    if all("fails the same way, but" in t for t in tried):
        return refuse("starting there saves too little time (" + "; ".join(tried) + ")")
    return refuse("starting there did not fail the same way (" + "; ".join(tried) + ")" + compiled_keys(tried)
                  + describe_left(saved))


def compiled_keys(tried: list[str]) -> str:
    """Why a replay's restore met keys it did not expect, when torch.compile named them:
    a module compiled in place of a submodule (``model.blocks[i] = torch.compile(b)``)
    holds its weights under ``_orig_mod.``; when the loop did that itself, in an
    iteration before the failing one, the replay restores into the module as it was
    before the loop, which never got those names."""
    if not any("_orig_mod" in t and "state_dict" in t for t in tried):
        return ""
    return ("; the module's weights were saved under the names torch.compile gives a compiled submodule "
            "(`_orig_mod.` in their keys), which the module restored before that iteration does not have: "
            "the loop compiles it itself in an earlier iteration, and starting there skips that")


def place_state(ctx: Context, path: Path, saved: dict, point: StatePoint):
    """The state file (and the files the run wrote before that iteration) in every later
    run's copy of the user's directory, beside the main script: (its name, the record the
    replay pass reads, where the written files are, their names); or why not."""
    layout, spec = ctx.layout, ctx.spec
    name = layout.state_name
    main_dir = Path(spec.script_rel).parent
    rel = str(main_dir / name) if main_dir != Path(".") else name
    if (spec.root_dir / rel).exists() and (spec.root_dir / rel).resolve() != (layout.data_dir / name).resolve():
        return f"a file of yours is named {name}"
    ctx.sandbox.add_file(rel, path)
    # The files the run wrote before that iteration (a checkpoint the training saved and
    # the statements before the failing loop load) go beside the state.
    files_name = layout.state_files_name
    files_src = ctx.scratch.state_written  # where the probe copied them (save_written_files)
    written = [f for f in saved.get("files") or () if (files_src / f).is_file()]
    if written and (spec.root_dir / main_dir / files_name).exists():
        written = []
        ctx.talk.note(f"the files the run wrote before {point_text(point)} are not put back: a file of yours is named "
                      f"{files_name}", show=False)
    for f in written:
        ctx.sandbox.add_file(str(main_dir / files_name / f), files_src / f)
    return name, state_record(saved, point, name, files_name if written else ""), files_src, written
