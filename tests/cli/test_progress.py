"""cli/progress.py: the plain progress lines shown off a terminal: the stages, a status
line every so often, and with ``--verbose`` every accepted edit."""

from __future__ import annotations

import io

from shrinkgpu.cli.progress import ProgressPrinter, _clock
from shrinkgpu.core import PassStarted, Verdict
from shrinkgpu.core import Tested as Judged  # (not a test class)
from shrinkgpu.reducer.events import BestSoFar, Reducing, Stage


def printer(**kw) -> tuple[ProgressPrinter, io.StringIO]:
    stream = io.StringIO()
    return ProgressPrinter(stream, **kw), stream


def test_stages_are_lines_and_every_accepted_edit_is_one_when_verbose():
    show, stream = printer(heartbeat=3600.0, verbose=True)
    show(Stage("running the original in a fresh interpreter"))
    show(Reducing({"train.py": "a\nb\nc\n"}, "train.py", 120))
    show(PassStarted("delete-statements", 0, 4, 120))
    show(Judged(Verdict.PASSED, 100, 120, tests=1))
    show(Judged(Verdict.REPRODUCED, 90, 120, tests=2))
    show(BestSoFar({"train.py": "a\nb\n"}, "train.py", 90))
    assert stream.getvalue() == ("shrinkgpu: running the original in a fresh interpreter\n"
                                 "shrinkgpu: delete-statements: 120 -> 90 tokens (2 candidates)\n")
    assert (show.tested, show.accepted, show.tokens, show.lines, show.tokens_start) == (2, 1, 90, 2, 120)


def test_the_status_line_says_the_pass_the_size_the_candidates_and_the_time():
    show, stream = printer(heartbeat=0.0)
    assert show.status().startswith("starting | - | 0 candidates, 0 accepted | 0.0/s | 0:00:0")
    show(PassStarted("propagate-constants", 0, 2, 50))
    show(BestSoFar({"train.py": "x\n"}, "train.py", 50))  # a heartbeat of 0: a status line each time
    line = stream.getvalue().splitlines()[-1]
    assert line.startswith("shrinkgpu: propagate-constants | 50 tokens, 1 lines | 0 candidates, 0 accepted | ")
    assert not show.verbose and "->" not in stream.getvalue()


def test_the_clock_is_hours_minutes_seconds():
    assert (_clock(0), _clock(61.9), _clock(3 * 3600 + 4 * 60 + 5)) == ("0:00:00", "0:01:01", "3:04:05")
