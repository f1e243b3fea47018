"""reducer/start.py: where the search starts, with a fake executor: each test hands the
phase the original's run, the bug and the program."""

from __future__ import annotations

import textwrap

from fakes import NEEDLE, bug, config, passes, signature
from shrinkgpu.reducer.facts import build_program
from shrinkgpu.reducer.pool import plan_workers
from shrinkgpu.reducer.start import start_point
from shrinkgpu.signature import Target
from shrinkgpu.worker import Isolation

LONG = textwrap.dedent("""\
    import torch

    for step in range(100000):
        train_step(step)
    explode(3)
    """)


def first_run(wall: float, **facts):
    return bug(wall=wall, loop_time=(("train.py", 3, 0.95),), **facts)


def start_of(ctx, first):
    target = Target(first.signature)
    inp = build_program(ctx, first, target)
    return start_point(ctx, first, target, inp, plan_workers(ctx, first), None)


def test_a_long_original_with_no_state_starts_where_a_cut_of_its_hot_loop_fails_the_same_way(tmp_path, contexts):
    script = tmp_path / "train.py"
    script.write_text(LONG)

    def slow_loop(text, job):
        wall = 40.0 if "range(100000)" in text else 0.5
        return bug(wall=wall) if NEEDLE in text else passes(wall=wall)

    ctx = contexts(config(script), slow_loop)
    start, captured = start_of(ctx, first_run(40.0))
    assert captured is None
    assert start.program is not None and "range(100000)" not in start.program.texts["train.py"]
    assert (start.what, start.wall) == ("the original with the loops that took its time cut", 0.5)
    assert [iso for iso, _ in ctx.executors.log.jobs] == [Isolation.FRESH]  # the cut's one check


def test_a_cut_that_fails_otherwise_is_said_and_the_search_starts_from_the_original(tmp_path, contexts):
    script = tmp_path / "train.py"
    script.write_text(LONG)
    ctx = contexts(config(script), lambda text, job: bug(signature("RuntimeError", "other"), wall=0.5))
    start, _ = start_of(ctx, first_run(40.0))
    assert start.program is None and start.what == "the original"
    assert "the loops that took its time cut" in start.tried
    assert any(n.startswith("the original with the loops that took its time cut does not fail the same way")
               for n in ctx.talk.notes)


def test_a_short_original_starts_from_itself_without_a_run(tmp_path, contexts):
    script = tmp_path / "train.py"
    script.write_text(LONG)
    ctx = contexts(config(script))
    start, _ = start_of(ctx, first_run(2.0))
    assert start.program is None and ctx.executors.log.jobs == []


def test_the_state_of_a_long_original_is_saved_at_its_failing_step_and_checked_fresh(tmp_path, contexts):
    script = tmp_path / "train.py"
    script.write_text(LONG)

    def saves_the_state(text, job):
        state = job.request.watch.state
        if state is not None:  # the run that saves it, as the probe would
            (tmp_path / "state").write_bytes(b"weights")
            __import__("shutil").copy(tmp_path / "state", state.path)
            saved = {"iteration": 7, "function": "<module>", "entries": [{"expr": "step", "kind": "value"}],
                     "rng": [], "bytes": 7}
            return bug(wall=40.0, state=saved)
        if "range(100000)" in text and NEEDLE in text:
            return bug(wall=40.0)
        return bug(wall=0.5) if NEEDLE in text else passes()

    ctx = contexts(config(script, write=True, extract=False), saves_the_state)
    first = first_run(40.0, loops=(("train.py", 3, 7),))
    start, _ = start_of(ctx, first)
    assert start.state is not None and start.state.iteration == 7
    assert start.what == "the program started at the failing step" and start.wall == 0.5
    assert set(start.data_files) == {"train.min.state.pt"}
    state, record, _files = ctx.layout.state
    assert state.read_bytes() == b"weights" and record.is_file()  # beside the output: --resume reads them
    runs = [job.request.watch.state is not None for _, job in ctx.executors.log.jobs]
    assert runs[0] and not any(runs[1:])  # one run saves it, the next ones check the start there


def test_a_state_whose_restore_meets_compiled_submodules_names_says_why_it_is_not_used(tmp_path, contexts):
    script = tmp_path / "train.py"
    script.write_text(LONG)
    # What load_state_dict says (torch 2.13) when the loop compiled a submodule in an
    # iteration the replay skips: the saved keys carry torch.compile's ``_orig_mod.``.
    unexpected = signature("RuntimeError", 'Error(s) in loading state_dict for Router:\n\tUnexpected key(s) in '
                           'state_dict: "experts.0._orig_mod.up.weight", "experts.0._orig_mod.up.bias". ', op=None)

    def restore_fails(text, job):
        state = job.request.watch.state
        if state is not None:
            __import__("pathlib").Path(state.path).write_bytes(b"weights")
            saved = {"iteration": 7, "function": "<module>", "entries": [{"expr": "model", "kind": "load"}],
                     "rng": [], "bytes": 7}
            return bug(wall=40.0, state=saved)
        if "load_state_dict" in text:
            return bug(unexpected, wall=0.5)
        return bug(wall=40.0) if NEEDLE in text else passes()

    ctx = contexts(config(script, write=True, extract=False), restore_fails)
    start, _ = start_of(ctx, first_run(40.0, loops=(("train.py", 3, 7),)))
    assert start.state is None
    [refused] = [n for n in ctx.talk.notes if "is not used" in n]
    assert "starting there did not fail the same way" in refused
    assert "`_orig_mod.` in their keys" in refused and "the loop compiles it itself" in refused


AFTER_THE_LOOP = textwrap.dedent("""\
    import torch

    for epoch in range(100000):
        torch.save(train(epoch), "checkpoints/best.pt")
    model = torch.load("checkpoints/best.pt")
    explode(model)
    """)


def test_a_failure_after_the_loops_on_what_they_wrote_starts_without_them_and_with_the_files_put_back(
        tmp_path, contexts):
    script = tmp_path / "train.py"
    script.write_text(AFTER_THE_LOOP)
    missing = signature("FileNotFoundError", "[Errno 2] No such file or directory: 'checkpoints/best.pt'", op=None)
    kept_by = []

    def reads_what_the_loop_wrote(text, job):
        written = job.request.watch.written
        if written is not None:  # the run that keeps the files, as the probe would
            kept_by.append(written)
            (tmp_path / "ckpt").write_bytes(b"weights")
            __import__("os").makedirs(f"{written}/checkpoints")
            __import__("shutil").copy(tmp_path / "ckpt", f"{written}/checkpoints/best.pt")
            return bug(wall=40.0, written={"files": ["checkpoints/best.pt"], "files_bytes": 7})
        if "range(100000)" in text:
            return bug(wall=40.0)
        return bug(wall=0.5) if "copytree" in text else bug(missing, wall=0.5)

    ctx = contexts(config(script, write=True, extract=False), reads_what_the_loop_wrote)
    start, _ = start_of(ctx, first_run(40.0))
    assert start.what == "the original with the loops that took its time cut and the files they wrote put back"
    assert start.program.texts["train.py"] == textwrap.dedent("""\
        import torch

        import pathlib
        import shutil
        shutil.copytree(pathlib.Path(__file__).with_name('train.min.files'), '.', dirs_exist_ok=True)
        model = torch.load("checkpoints/best.pt")
        explode(model)
        """)
    assert start.wall == 0.5 and set(start.data_files) == {"train.min.files"}
    assert (start.data_files["train.min.files"] / "checkpoints" / "best.pt").read_bytes() == b"weights"
    assert len(kept_by) == 1  # one more run of the original keeps them
    [said] = [n for n in ctx.talk.notes if "the search starts there" in n]
    assert "checkpoints/best.pt" in said and "hold your weights or data" in said.replace("holds", "hold")


def test_a_failure_after_the_loops_that_wrote_no_files_keeps_the_original(tmp_path, contexts):
    script = tmp_path / "train.py"
    script.write_text(AFTER_THE_LOOP)
    other = signature("RuntimeError", "something else", op=None)

    def writes_nothing(text, job):
        if job.request.watch.written is not None:
            return bug(wall=40.0, written={"files": []})
        return bug(wall=40.0) if "range(100000)" in text else bug(other, wall=0.5)

    ctx = contexts(config(script, write=True, extract=False), writes_nothing)
    start, _ = start_of(ctx, first_run(40.0))
    assert start.program is None and start.what == "the original"
    assert any("was not tried: it wrote none" in n for n in ctx.talk.notes)
