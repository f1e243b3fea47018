"""worker/protocol.py: every message between the processes, typed both ways."""

from __future__ import annotations

import json

import pytest

from shrinkgpu.worker.protocol import (
    CancelCommand,
    Capture,
    Finished,
    PreloadCommand,
    Preloaded,
    PreloadRefusal,
    ProbeReport,
    Ready,
    RunCommand,
    RunRequest,
    RunStatus,
    ServerError,
    Started,
    StateAt,
    Watch,
    command_from_json,
    event_from_json,
)


def through_a_pipe(message) -> dict:
    """What the other side reads: the message as one JSON line."""
    return json.loads(json.dumps(message.to_json()))


def test_a_run_command_carries_its_typed_request_both_ways():
    watch = Watch(count_loops=True, capture=Capture("torch.gather", 3, "/s/capture.pt"),
                  state=StateAt("train.py", 12, ((10, 2), (12, 7)), "/s/state.pt", ("model",), "/s/p", 1),
                  output_of=("torch.gather", 1))
    request = RunRequest(script="/r/train.py", argv=("train.py", "--epochs", "3"), cwd="/r", observation="/r/o.json",
                         crash_log="/r/crash.txt", roots=("/r",), watch=watch)
    command = RunCommand(id=7, mode="fork", request=request, request_path="/r/request.json", timeout=5.0,
                         stdin="/s/stdin", stdout="/r/out", stderr="/r/err", env={"CUDA_VISIBLE_DEVICES": "1"})
    back = command_from_json(through_a_pipe(command))
    assert back == command and back.request.watch == watch
    preload = PreloadCommand(("torch", "numpy"), 2)
    assert command_from_json(through_a_pipe(preload)) == preload
    assert command_from_json(through_a_pipe(CancelCommand(7))) == CancelCommand(7)
    with pytest.raises(ValueError, match="unknown command 'shutdown'"):
        command_from_json({"op": "shutdown"})


@pytest.mark.parametrize("event", [
    Ready(pid=12, subreaper=True),
    Preloaded(imported=3, failed=["badmod"], seconds=1.5),
    PreloadRefusal(module="threaded", reason="a thread was running at fork"),
    Started(id=1, pid=99),
    Finished(id=1, exit_code=None, signal=11, timed_out=False, cancelled=False, wall=0.25),
    Finished(id=2, error="cannot fork: CUDA is initialized"),
    ServerError(message="unknown command"),
])
def test_each_event_of_the_supervisor_reads_back_as_itself(event):
    assert event_from_json(through_a_pipe(event)) == event


def test_an_event_this_side_does_not_know_is_ignored():
    assert event_from_json({"event": "diagnostic", "text": "x"}) is None


def test_the_probes_report_reads_back_by_field():
    report = ProbeReport(status=RunStatus.EXCEPTION, exit_code=1, chain=({"type": "IndexError", "message": "x"},),
                         reads=("data/rows.txt",), seed_sites=(("train.py", 3, True),),
                         modules=(("torch", "/site/torch/__init__.py", None),), duration=0.5, output="float32[]")
    back = ProbeReport.from_json(through_a_pipe(report))
    assert back == report and back.status is RunStatus.EXCEPTION
    # a report a probe wrote with fields it did not need: everything else as empty
    assert ProbeReport.from_json({"status": "ok", "exit_code": 0}) == ProbeReport()


def test_a_status_compares_as_its_word():
    assert RunStatus.NO_REPORT == "no-report" and f"{RunStatus.TIMEOUT}" == "timeout"


def test_a_request_survives_its_trip_as_json():
    request = RunRequest(
        script="/r/root/s.py", argv=("s.py", "--epochs", "3"), cwd="/r/root", observation="/r/obs.json",
        crash_log="/r/crash.txt", roots=("/r/root",), module=None,
        watch=Watch(count_loops=True, capture=Capture("torch.gather", 3, "/r/call.pt"), save_objects="/r/objects"),
    )
    assert RunRequest.from_json(json.loads(json.dumps(request.to_json()))) == request


def test_one_list_of_the_paths_a_watch_writes_and_one_way_to_move_them():
    from shrinkgpu.worker.protocol import Capture, StateAt, Watch

    watch = Watch(cut="/s/call.pt", keep_raised="/s/raised", collectives="/s/coll.json",
                  capture=Capture(op="torch.gather", call=2, path="/s/capture.pt"),
                  state=StateAt(file="train.py", header=3, iterations=((3, 1),), path="/s/state.pt",
                                progress="/s/progress.json"))
    assert watch.paths() == {"cut": "/s/call.pt", "keep_raised": "/s/raised", "collectives": "/s/coll.json",
                             "capture.path": "/s/capture.pt", "state.path": "/s/state.pt",
                             "state.progress": "/s/progress.json"}
    rank = watch.for_rank(1)
    assert set(rank.paths().values()) == {p + ".rank1" for p in watch.paths().values()}
    assert (rank.capture.op, rank.state.iterations) == ("torch.gather", ((3, 1),))  # only the paths move
    child = watch.for_child(2, "/s/obs.json.collectives.child2")
    assert child.paths() == {"keep_raised": "/s/raised.child2", "collectives": "/s/obs.json.collectives.child2",
                             "capture.path": "/s/capture.pt.child2"}
    assert Watch().paths() == {} and Watch().with_paths(str.upper) == Watch()
