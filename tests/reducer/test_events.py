"""reducer/events.py: ``Talk``, the one way a phase says something: events to every
listener, notes for the report, and a line every so often while a long run goes on."""

from __future__ import annotations

import concurrent.futures
import threading

from fakes import passes
from shrinkgpu.reducer.events import Stage, Talk


def test_a_note_is_kept_for_the_report_and_shown_unless_asked_not_to():
    heard, also = [], []
    talk = Talk(listeners=[heard.append, also.append])
    talk.stage("running the original in a fresh interpreter")
    talk.note("4 candidates at once on 2 CPU cores")
    talk.note("interrupted: the result was not re-checked", show=False)
    assert talk.notes == ["4 candidates at once on 2 CPU cores", "interrupted: the result was not re-checked"]
    assert heard == also == [Stage("running the original in a fresh interpreter"),
                             Stage("4 candidates at once on 2 CPU cores")]


def test_waiting_on_a_long_run_says_it_is_still_running_and_returns_its_observation():
    heard = []
    talk = Talk(listeners=[heard.append], heartbeat=0.05)
    future: concurrent.futures.Future = concurrent.futures.Future()
    done = passes()
    timer = threading.Timer(0.3, future.set_result, (done,))
    timer.start()
    try:
        assert talk.wait(future, "the original is still running", where=lambda: ", step 3") is done
    finally:
        timer.cancel()
    assert heard and all(e.message == "the original is still running (0:00, step 3)" for e in heard)
    assert talk.notes == []  # progress, not a fact for the report
