"""cli/progress.py's JsonProgress (``reduce --progress-json``): each event one JSON object a
line, what the MCP server turns into progress notifications (issue 49)."""

from __future__ import annotations

import io
import json

from shrinkgpu.cli.progress import JsonProgress
from shrinkgpu.core import Improved, PassStarted, Verdict
from shrinkgpu.core import Tested as Judged  # (not a test class)
from shrinkgpu.reducer.events import BestSoFar, Reducing, Stage


def test_each_event_is_one_json_line_and_tests_are_thinned():
    stream = io.StringIO()
    show = JsonProgress(stream, every=3600.0)
    show(Stage("running the original in a fresh interpreter"))
    show(Reducing({"train.py": "a\nb\nc\n"}, "train.py", 120))
    show(PassStarted("delete-statements", 0, 4, 120))
    show(Judged(Verdict.PASSED, 100, 120, tests=1))
    show(Judged(Verdict.REPRODUCED, 90, 120, tests=2))  # within ``every`` of the last: not written
    show(Improved("delete-statements", 90, 120))
    show(BestSoFar({"train.py": "a\nb\n"}, "train.py", 90))
    show.stage("a note")
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert all(isinstance(line.pop("seconds"), float) for line in lines)
    assert lines == [
        {"event": "stage", "message": "running the original in a fresh interpreter"},
        {"event": "reducing", "tokens": 120, "lines": 3},
        {"event": "pass", "name": "delete-statements", "level": 0, "units": 4},
        {"event": "tested", "tests": 1, "accepted": 0},
        {"event": "improved", "pass": "delete-statements"},
        {"event": "best", "tokens": 90, "lines": 2, "main": "train.py", "files": {"train.py": "a\nb\n"}},
        {"event": "stage", "message": "a note"},
    ]
    assert show.accepted == 1
