"""A whole reduction with a fake executor (no process runs, a candidate's verdict is a
function of its text): the phases together, in milliseconds.  Each phase alone is
tested in the module of its name (test_original.py, test_pool.py, ...)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from fakes import NEEDLE, SCRIPT, Log, NoCollectEnv, bug, config, executors, fails_with_needle, passes, signature
from shrinkgpu.reducer import ReduceError, reduce
from shrinkgpu.reducer import search as search_module
from shrinkgpu.reducer import session as session_module
from shrinkgpu.worker import Dropped, Isolation


# -- the whole run ---------------------------------------------------------------------------
def test_a_whole_reduction_runs_through_the_executor_it_is_given(script):
    make = executors(fails_with_needle)
    result = reduce(config(script), executors=make)
    assert result.files == {"train.py": NEEDLE + "\n"}
    assert result.verified == (2, 2)
    assert result.isolation is Isolation.FORK
    first_isolation, first_job = make.log.jobs[0]
    # The first run is the user's run: a fresh interpreter, watched for everything the
    # passes need, in a copy of the user's directory.
    assert first_isolation is Isolation.FRESH
    assert first_job.request.watch.count_loops and first_job.request.watch.collect_modules
    assert first_job.request.argv == (first_job.request.script,)  # typed absolute: the copy's path
    assert Path(first_job.request.cwd).name == "root" and make.log.texts[0] == SCRIPT
    assert script.read_text() == SCRIPT  # the input is never touched


def test_the_progress_events_and_notes_come_in_order(script):
    events = []

    def two_threads_a_run(text, job):  # (so that 4 at once on this machine's cores are capped)
        return bug(environment={"threads": {"torch": 2}}) if NEEDLE in text else passes()

    make = executors(two_threads_a_run)
    result = reduce(config(script, jobs=4), on_event=events.append, executors=make)
    stages = [e.message for e in events if type(e).__name__ == "Stage"]
    assert stages[0] == "running the original in a fresh interpreter"
    assert stages[1].startswith("4 candidates at once on")  # a note, shown when it is made
    assert stages.index("verifying the result in fresh interpreters") > stages.index(
        next(s for s in stages if s.startswith("reducing "))
    )
    assert result.notes == [stages[1]]


def test_a_program_whose_output_is_one_of_its_modules_is_refused(script):
    (script.parent / "helpers.py").write_text("x = 1\n")

    def imports_helpers(text, job):
        return bug(modules=(("helpers", str(Path(job.run.root) / "helpers.py"), "helpers.py"),))

    with pytest.raises(ReduceError, match="one of the script's own files") as caught:
        reduce(config(script, output=script.parent / "helpers.py"), executors=executors(imports_helpers))
    assert caught.value.exit_code == 2


def test_a_refused_fork_server_falls_back_to_fresh_interpreters_and_says_why(script):
    make = executors(fails_with_needle, refuse_fork="a thread was running at fork")
    result = reduce(config(script), executors=make)
    assert result.isolation is Isolation.FRESH
    assert result.files == {"train.py": NEEDLE + "\n"}
    assert result.isolation_because.startswith("forking is not safe here (a thread was running at fork)")
    assert result.preload_dropped == (Dropped("badmod", "started a thread"),)
    assert result.to_json()["preload_dropped"] == [{"module": "badmod", "reason": "started a thread"}]
    assert Isolation.FORK not in make.log.started


def test_isolation_fork_asked_for_stops_when_the_server_is_refused(script):
    make = executors(fails_with_needle, refuse_fork="a thread was running at fork")
    with pytest.raises(ReduceError, match="--isolation fork is not possible here: a thread was running at fork"):
        reduce(config(script, isolation=Isolation.FORK), executors=make)


def test_forked_runs_that_fail_differently_send_every_candidate_to_fresh_interpreters(script):
    log = Log()

    def differs_when_forked(text, job):
        forked = log.jobs[-1][0] is Isolation.FORK
        return bug(signature("RuntimeError", "something else", op=None)) if forked else fails_with_needle(text, job)

    result = reduce(config(script), executors=executors(differs_when_forked, log))
    assert result.isolation is Isolation.FRESH
    assert result.files == {"train.py": NEEDLE + "\n"}
    assert result.isolation_because.startswith("the original failed differently in a forked worker")


def test_a_script_that_needs_every_gpu_is_not_pinned(script):
    log = Log()

    def needs_both(text, job):
        pinned = "CUDA_VISIBLE_DEVICES" in job.env
        return bug(signature("RuntimeError", "needs two devices", op=None)) if pinned else fails_with_needle(text, job)

    result = reduce(config(script, gpus=("0", "1"), env={"PATH": "/usr/bin"}), executors=executors(needs_both, log))
    assert (result.gpus, result.jobs) == ((), 1)
    assert result.files == {"train.py": NEEDLE + "\n"}



def compiles(log: Log, warm: list[tuple[Isolation, bool]], differs_when_warm: bool = False, wall: float = 0.01):
    """A fake script that compiles: it finds its cache entry where torch.compile's cache
    variable points (a warm start) or writes it there, and fails with the needle."""

    def behaviour(text, job):
        entry = Path(job.env["TORCHINDUCTOR_CACHE_DIR"]) / "fxgraph" / "entry"
        found = entry.exists()
        warm.append((log.jobs[-1][0], found))
        entry.parent.mkdir(parents=True, exist_ok=True)
        entry.write_text("compiled")
        if found and differs_when_warm:
            return bug(signature("RuntimeError", "a cache entry could not be loaded", op=None), wall=wall)
        return bug(wall=wall) if NEEDLE in text else passes(wall=wall)

    return behaviour


def test_the_caches_a_compiling_original_left_start_every_candidate_but_the_fresh_checks(script):
    log, warm = Log(), []
    result = reduce(config(script), executors=executors(compiles(log, warm), log))
    assert result.files == {"train.py": NEEDLE + "\n"}
    assert any(n.startswith("torch.compile's caches from a run of the original (0.0 MiB) are copied into each "
                            "candidate's directory") for n in result.notes), result.notes
    # the first run, the two --confirm runs (fresh) and the first calibration run compile
    # from nothing; every forked run after it finds what that one compiled, and the
    # fresh checks of the result (and its run alone in an empty directory) never do
    assert warm[:4] == [(Isolation.FRESH, False)] * 3 + [(Isolation.FORK, False)]
    assert all(found for isolation, found in warm[4:] if isolation is Isolation.FORK)
    assert len([1 for isolation, _ in warm[4:] if isolation is Isolation.FORK]) > 2
    assert [found for isolation, found in warm if isolation is Isolation.FRESH] == [False] * 6


def test_caches_that_change_the_original_s_bug_are_not_used(script):
    log, warm = Log(), []
    result = reduce(config(script), executors=executors(compiles(log, warm, differs_when_warm=True), log))
    assert result.files == {"train.py": NEEDLE + "\n"}
    assert result.isolation is Isolation.FORK
    assert any(n.startswith("the original failed differently in a forked worker (RuntimeError: a cache entry could "
                            "not be loaded), when it started with torch.compile's caches") for n in result.notes)
    # the calibration run that found the caches is the only run that ever did
    assert [found for _, found in warm].count(True) == 1


def test_a_slow_compiling_original_is_run_once_more_with_its_caches(script):
    log, warm = Log(), []
    result = reduce(config(script), executors=executors(compiles(log, warm, wall=6.0), log))
    assert any("with them the original ran in 6.0s, without them in 6.0s" in n for n in result.notes), result.notes
    # one calibration run fills the caches, one more is the check: then the oracle's
    assert warm[3:5] == [(Isolation.FORK, False), (Isolation.FORK, True)]
    assert log.texts[3:5] == [SCRIPT, SCRIPT]


def test_an_original_that_compiles_nothing_costs_no_run_more(script):
    log = Log()
    # a long original: its own time after torch's import is over six imports (1.6 s
    # each where a run did not measure its own), and its timing one calibration run
    slow = lambda text, job: bug(wall=12.0) if NEEDLE in text else passes(wall=12.0)  # noqa: E731
    result = reduce(config(script), executors=executors(slow, log))
    assert not any("torch.compile's caches" in n for n in result.notes)
    # the first run, two --confirm runs, one calibration run: the next is a candidate
    assert [isolation for isolation, _ in log.jobs[:4]] == [Isolation.FRESH] * 3 + [Isolation.FORK]
    assert log.texts[:4] == [SCRIPT] * 4 and log.texts[4] != SCRIPT


# -- the search --------------------------------------------------------------------------------
def saves_objects(tmp_path):
    pickle = tmp_path / "saved.pkl"
    pickle.write_bytes(b"\x80\x04K\x01.")  # pickle of 1

    def behaviour(text, job):
        if NEEDLE not in text:
            return passes()
        saved = (({"name": "data", "class": "Data", "path": str(pickle), "bytes": 5},)
                 if job.request.watch.save_objects else ())
        return bug(saved_objects=saved)

    return behaviour


def test_rebase_runs_go_through_the_oracle_and_are_counted(script, tmp_path):
    log = Log()
    result = reduce(config(script), executors=executors(saves_objects(tmp_path), log))
    rebase_runs = [job for _, job in log.jobs
                   if (job.request.watch.save_objects or "").rsplit("/", 1)[-1].startswith("objects-")]
    assert rebase_runs  # the data objects saved again as each accepted program builds them
    # Before the oracle: the first run, the two --confirm runs and three calibration runs;
    # every run after it is the oracle's, rebase runs included, but the result's run
    # alone in an empty directory (reducer/alone.py), the last one.
    assert result.oracle.runs == len(log.jobs) - 7
    assert result.alone == {"artifact": "result", "file": "train.min.py", "checked": True, "result_needs": []}


def test_the_sizes_only_the_first_run_evaluates_stay_with_every_program_the_search_rebases(script, monkeypatch):
    size = {"file": "train.py", "function": "<module>", "expression": "len(data)", "literal": "3"}

    def behaviour(text, job):
        if NEEDLE not in text:
            return passes()
        return bug(sizes=(size,) if job.request.watch.sizes else ())

    programs = []
    rebase = search_module.Adapter.rebase

    def watched(self, cand):
        rebased = rebase(self, cand)
        programs.append(rebased.program)
        return rebased

    monkeypatch.setattr(search_module.Adapter, "rebase", watched)
    log = Log()
    reduce(config(script), executors=executors(behaviour, log))
    assert [job.request.watch.sizes for _, job in log.jobs].count(True) == 1  # the first run only
    assert programs and all(
        [(s.function, s.expression, s.literal) for s in p.facts.sizes] == [("<module>", "len(data)", "3")]
        for p in programs
    )


def test_the_result_falls_back_when_the_smallest_program_does_not_reproduce_fresh(script):
    log = Log()

    def fresh_needs_helper(text, job):
        fresh = log.jobs[-1][0] is Isolation.FRESH
        if fresh and "total = helper(3)" not in text and len(log.jobs) > 3:
            return bug(signature("NameError", "name 'total' is not defined", op=None))
        return fails_with_needle(text, job)

    result = reduce(config(script), executors=executors(fresh_needs_helper, log))
    assert NEEDLE in result.files["train.py"] and "total" in result.files["train.py"]
    assert result.verified[0] == result.verified[1] > 0



# -- after the search ----------------------------------------------------------------------------
def captures_the_call(text, job):
    """The script fails at cross_entropy; a capture run saves the call as the probe would,
    and the extracted call fails the same way."""
    capture = job.request.watch.capture
    if capture is not None:
        meta = {"dtype": "float32", "shape": [3, 4], "stride": [4, 1], "offset": 0, "device": "cpu",
                "requires_grad": False, "shares_with": None, "parameter": False}
        target = {**meta, "dtype": "int64", "shape": [3], "stride": [1], "values": [0, 2, 4]}
        record = {"op": capture.op, "args": [{"t": "args[0]"}, {"t": "args[1]"}], "kwargs": {}, "nondefault": [],
                  "meta": {"args[0]": meta, "args[1]": target}}
        Path(capture.path + ".json").write_text(__import__("json").dumps(record))
    if "cross_entropy(" in text:
        return bug()
    return fails_with_needle(text, job)


def test_the_failing_call_is_extracted_and_checked_through_the_same_executors(script, monkeypatch):
    monkeypatch.setattr(session_module, "CollectEnv", NoCollectEnv)
    log = Log()
    result = reduce(config(script, write=True), executors=executors(captures_the_call, log))
    extracted = script.parent / "train.extracted.py"
    assert result.extracted is not None and result.extracted.path == extracted
    assert result.extracted.level == "metadata"
    assert "torch.nn.functional.cross_entropy(" in extracted.read_text()
    assert "torch.tensor([0, 2, 4]" in extracted.read_text()  # labels exact, floats random
    # The check of the extracted call ran through the fake too: no process anywhere.
    assert any("cross_entropy(" in text for text in log.texts)


# -- where the result is (issue 25) ------------------------------------------------------------
def test_a_result_of_several_files_leaves_nothing_of_ours_at_the_path_asked_for(tmp_path, monkeypatch):
    monkeypatch.setattr(session_module, "CollectEnv", NoCollectEnv)
    (tmp_path / "train.py").write_text("import importlib\nprint(1)\nimportlib.import_module('helper').explode(3)\n")
    (tmp_path / "helper.py").write_text("def explode(n):\n    raise IndexError(n)\n")

    def helper_is_a_module(text, job):
        helper = Path(job.run.root) / "helper.py"
        if not helper.exists():
            return bug(signature("ModuleNotFoundError", "No module named 'helper'", op=None))
        return bug(modules=(("helper", str(helper), "helper.py"),)) if "explode(3)" in text else passes()

    out = tmp_path / "out" / "x.min.py"
    out.parent.mkdir()
    out.write_text("# shrinkgpu: partial result (the search was still going): not verified\nexplode(3)\n")
    events = []
    result = reduce(config(tmp_path / "train.py", write=True, output=out, extract=False), on_event=events.append,
                    executors=executors(helper_is_a_module))
    assert result.output == tmp_path / "out" / "x.min" and result.output.is_dir()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["x.min", "x.min.json", "x.min.md"]
    assert result.command == "cd x.min && python train.py"
    stages = [e.message for e in events if type(e).__name__ == "Stage"]
    assert any(s.startswith("the program is 2 files (helper.py, train.py): if the result still needs more")
               for s in stages)
    assert any(s.startswith("the result still needs 2 files (helper.py, train.py), so it is the directory")
               for s in stages)
    assert stages[-1] == "run it with: cd x.min && python train.py"
    assert result.to_json()["command"] == "cd x.min && python train.py"


def reads_its_data(text, job):
    """Reproduces where data/rows.txt is beside it (relative to its working directory)."""
    if NEEDLE not in text:
        return passes()
    if not (Path(job.request.cwd) / "data" / "rows.txt").is_file():
        return bug(signature("FileNotFoundError", "No such file or directory: 'data/rows.txt'", op=None))
    return bug(reads=("data/rows.txt",))


@pytest.fixture
def with_data(script):
    (script.parent / "data").mkdir()
    (script.parent / "data" / "rows.txt").write_text("1 2 3\n")
    return script


def test_the_data_a_result_reads_is_copied_beside_it_when_written_elsewhere(with_data, monkeypatch):
    monkeypatch.setattr(session_module, "CollectEnv", NoCollectEnv)
    out = with_data.parent / "elsewhere" / "x.min.py"
    result = reduce(config(with_data, write=True, output=out, extract=False), executors=executors(reads_its_data))
    assert result.beside == ("data/rows.txt",)
    assert (out.parent / "data" / "rows.txt").read_text() == "1 2 3\n"
    assert result.command == "python x.min.py"
    assert result.in_place == "reproduces there too, with the data it reads copied beside it"
    assert "- copied beside it, because it reads them: `data/rows.txt`" in result.report.read_text()


def test_data_too_large_to_copy_makes_the_command_run_where_the_data_is(with_data, monkeypatch):
    from shrinkgpu.report import files as report_files

    monkeypatch.setattr(session_module, "CollectEnv", NoCollectEnv)
    monkeypatch.setattr(report_files.place_needed_files, "__defaults__", (0,))
    out = with_data.parent / "elsewhere" / "x.min.py"
    result = reduce(config(with_data, write=True, output=out, extract=False), executors=executors(reads_its_data))
    assert result.beside == () and not (out.parent / "data").exists()
    assert result.run_from == with_data.parent
    assert result.command == f"cd {with_data.parent} && python {out}"
    assert result.in_place == "reproduces there too, run from the directory that holds its data"


LONG = textwrap.dedent("""\
    import torch

    for step in range(100000):
        train_step(step)
    explode(3)
    """)


def test_a_long_original_with_no_state_starts_where_a_cut_of_its_hot_loop_fails_the_same_way(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(LONG)
    walls = []

    def slow_loop(text, job):
        # the loop takes the time; the failure comes after it either way
        wall = 40.0 if "range(100000)" in text else 0.5
        walls.append(wall)
        return bug(wall=wall, loop_time=(("train.py", 3, 0.95),)) if NEEDLE in text else passes(wall=wall)

    make = executors(slow_loop)
    result = reduce(config(script, confirm=1), executors=make)
    assert result.start == {"from": "cut", "what": "the original with the loops that took its time cut",
                            "seconds": 0.5}
    # the one run of the original is the user's: its rate and calibration are measured on the cut
    assert walls.count(40.0) == 1
    assert result.files == {"train.py": NEEDLE + "\n"}


def test_a_cut_that_fails_otherwise_is_said_and_the_search_starts_from_the_original(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(LONG)

    def needs_the_loop(text, job):
        if "range(100000)" not in text:
            return bug(signature("RuntimeError", "other"), wall=0.5)
        return bug(wall=40.0, loop_time=(("train.py", 3, 0.95),))

    result = reduce(config(script, confirm=0, max_tests=3), executors=executors(needs_the_loop))
    assert result.start == {"from": "original", "what": "the original", "seconds": 40.0}


# -- a torch.compile failure: the eager contrast and the comparisons ---------------------------
COMPILED = textwrap.dedent("""\
    import torch


    def gate(x):
        return x


    data = [1, 2, 3]
    print("logging", data)
    fn = torch.compile(gate, fullgraph=True)
    explode(3)
    """)
GRAPH_BREAK = signature("torch._dynamo.exc.Unsupported", "Data-dependent branching", op=None)


def compiled_behaviour(text, job):
    """A program fails (compiled) while it calls ``explode``; run eagerly (the contrast)
    it passes while it still compiles ``gate`` with fullgraph=True: without that line its
    failure is its own code's, with or without the compiler."""
    if NEEDLE not in text:
        return passes()
    if job.request.watch.eager and "torch.compile(gate, fullgraph=True)" in text:
        return passes()
    return bug(GRAPH_BREAK)


def test_a_compile_failure_that_passes_eagerly_keeps_what_needs_the_compiler(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(COMPILED)
    log = Log()
    result = reduce(config(path, keep_error="Data-dependent", ablate=False),
                    executors=executors(compiled_behaviour, log))
    assert result.eager == "passes"
    # what fails eagerly too was refused, and what does not need the compiler went
    # (the two blank lines under ``gate`` put back by the cleanup: syntax/tidy.py)
    assert result.files == {"train.py": "import torch\n\n\ndef gate(x):\n    pass\n\n\n"
                                        "torch.compile(gate, fullgraph=True)\nexplode(3)\n"}
    assert result.oracle.other_errors.get("fails without compiling too", 0) >= 1
    # the original's eager run, then every reproducing candidate's
    eager_runs = [text for (_, job), text in zip(log.jobs, log.texts) if job.request.watch.eager]
    assert eager_runs[0] == COMPILED and len(eager_runs) > 1


def test_a_compile_failure_that_fails_alike_eagerly_asks_nothing_of_candidates(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(COMPILED)
    log = Log()
    result = reduce(config(path, keep_error="Data-dependent", ablate=False),
                    executors=executors(lambda text, job: bug(GRAPH_BREAK) if NEEDLE in text else passes(), log))
    assert result.eager == "fails the same way"
    assert result.files == {"train.py": NEEDLE + "\n"}
    assert len([1 for _, job in log.jobs if job.request.watch.eager]) == 1  # the original's, and no candidate's


def test_the_comparisons_of_a_compile_failure_run_each_backend_in_a_fresh_interpreter(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(COMPILED)
    log = Log()

    def behaviour(text, job):
        # the comparisons: compilation off passes, so does fullgraph=False; Dynamo alone
        # (backend="eager") fails the same way, and so does every other backend
        if "torch.compile" not in text or "fullgraph=False" in text:
            return passes()
        return compiled_behaviour(text, job)

    result = reduce(config(path, keep_error="Data-dependent"), executors=executors(behaviour, log))
    ablated = result.ablation
    assert ablated is not None
    by = {o.change: o for o in ablated.outcomes}
    assert by["torch.compile off"].result == "passes"
    assert by['backend="eager"'].result == "same bug"
    assert by['backend="eager"'].edit == ('- torch.compile(gate, fullgraph=True)\n'
                                          '+ torch.compile(gate, fullgraph=True, backend="eager")')
    assert by["fullgraph=False"].result == "passes"
    # fullgraph=False passes where backend="eager" does not: the graph break is fatal only
    # because fullgraph=True makes it so
    assert ablated.kind == "operator contract" and "fullgraph=False" in ablated.reason
    # each change is its own fresh run of the result, after the verification's
    texts = {text for (iso, _), text in zip(log.jobs, log.texts) if iso is Isolation.FRESH}
    for o in ablated.outcomes:
        assert any(all(line[2:] in text for line in o.edit.splitlines() if line.startswith("+ ")) for text in texts), o


def test_a_change_of_the_whole_case_records_what_the_failing_call_returned(tmp_path):
    import dataclasses

    path = tmp_path / "train.py"
    path.write_text("try:\n    import fastmod\nexcept ImportError:\n    fastmod = None\n" + SCRIPT)
    log = Log()

    def behaviour(text, job):
        if "sys.modules['fastmod'] = None" in text:
            return dataclasses.replace(passes(), output="float32[] all finite")
        # (the optional module is what fails: the minimal case keeps its import)
        return bug() if NEEDLE in text and "    import fastmod\nexcept ImportError" in text else passes()

    result = reduce(config(path), executors=executors(behaviour, log))
    assert result.ablation is not None, (result.files, result.notes)
    (outcome,) = [o for o in result.ablation.outcomes if o.change == "fastmod disabled"]
    assert (outcome.result, outcome.output) == ("passes", "float32[] all finite")
    # asked of the run: the result of the call that failed in the minimal case
    (job,) = [job for (_, job), text in zip(log.jobs, log.texts) if "sys.modules['fastmod'] = None" in text]
    assert job.request.watch.output_of == ("torch.nn.functional.cross_entropy", 1)


def test_the_report_names_the_code_revision_the_reduction_started_from(script, monkeypatch):
    import subprocess

    monkeypatch.setattr(session_module, "CollectEnv", NoCollectEnv)
    repo = script.parent

    def git(*args):
        return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                              capture_output=True, text=True, check=True).stdout.strip()

    git("init", "-q")
    git("add", "train.py")
    git("commit", "-qm", "one")
    started = git("rev-parse", "--short", "HEAD")
    committed = []

    def commits_during_the_run(text, job):
        if not committed:  # the user commits something else while the reduction runs
            (repo / "notes.txt").write_text("x")
            git("add", "notes.txt")
            git("commit", "-qm", "two")
            committed.append(git("rev-parse", "--short", "HEAD"))
        return fails_with_needle(text, job)

    out = repo / "out" / "repro.min.py"
    result = reduce(config(script, write=True, output=out, extract=False),
                    executors=executors(commits_during_the_run))
    assert committed and committed[0] != started
    assert f"- code revision: {started} (when the reduction started)" in result.report.read_text()
