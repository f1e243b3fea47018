"""The runner's seam: what it hands an executor (a typed request, a prepared run) and
which executor runs what, with fake executors (no process)."""

from __future__ import annotations

import json

from shrinkgpu.worker import Capture, Isolation, RunRequest, Runner, ScriptSpec, Watch

from fakes import Log, bug, executors


def test_a_request_survives_its_trip_as_json():
    request = RunRequest(
        script="/r/root/s.py", argv=("s.py", "--epochs", "3"), cwd="/r/root", observation="/r/obs.json",
        crash_log="/r/crash.txt", roots=("/r/root",), module=None,
        watch=Watch(count_loops=True, capture=Capture("torch.gather", 3, "/r/call.pt"), save_objects="/r/objects"),
    )
    assert RunRequest.from_json(json.loads(json.dumps(request.to_json()))) == request


def test_the_runner_hands_each_run_to_its_executor_as_the_user_would_start_it(tmp_path):
    (tmp_path / "s.py").write_text("pass\n")
    (tmp_path / "data.txt").write_text("rows\n")
    log = Log()
    spec = ScriptSpec(script=tmp_path / "s.py", args=("--n", "2"), cwd=tmp_path, argv0="s.py", env={"HOME": "/h"})
    with Runner(spec, threads=1, executors=executors(lambda t, j: bug(), log)) as runner:
        runner.start(["torch"])
        runner.run({"s.py": "print(1)\n"}, timeout=5, watch=Watch(count_loops=True), env={"CUDA_VISIBLE_DEVICES": "1"})
        runner.run({"s.py": "print(2)\n"}, timeout=5, isolation=Isolation.FRESH)
    (forked, first), (fresh, second) = log.jobs
    assert (forked, fresh) == (Isolation.FORK, Isolation.FRESH)  # a fresh run beside the fork server
    assert log.texts == ["print(1)\n", "print(2)\n"]
    assert first.request.argv == ("s.py", "--n", "2")
    assert first.request.cwd == str(first.run.root) and first.request.watch.count_loops
    assert first.env["CUDA_VISIBLE_DEVICES"] == "1" and first.env["TMPDIR"] == str(first.run.tmp)
    assert first.env["OMP_NUM_THREADS"] == "1"  # the thread cap travels with every run
    assert not second.request.watch.count_loops
    assert not first.run.path.exists()  # released when the run was over


def test_a_refused_fork_server_leaves_fresh_interpreters_with_the_reason(tmp_path):
    (tmp_path / "s.py").write_text("pass\n")
    log = Log()
    make = executors(lambda t, j: bug(), log, refuse_fork="a thread was running")
    with Runner(ScriptSpec(script=tmp_path / "s.py", cwd=tmp_path), executors=make) as runner:
        report = runner.start(["torch"])
        runner.run({"s.py": "pass\n"}, timeout=5)
    assert report.isolation is Isolation.FRESH and runner.isolation is Isolation.FRESH
    assert "forking is not safe here (a thread was running)" in report.note
    assert report.dropped == ("badmod (started a thread)",)
    assert [mode for mode, _ in log.jobs] == [Isolation.FRESH]
