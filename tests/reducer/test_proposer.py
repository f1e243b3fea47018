"""reducer/proposer.py: ``--propose-with``'s command, run with the program on stdin and in
``$SHRINKGPU_FILES``, its JSON lines read back; a command that fails, runs past its time
or proposes nothing is skipped with a note."""

from __future__ import annotations

import json
import shlex
import sys
import time

from shrinkgpu.limits import Limits
from shrinkgpu.passes.external import Proposal
from shrinkgpu.reducer import proposer as module
from shrinkgpu.reducer.events import Talk
from shrinkgpu.reducer.proposer import ShellProposer, parse_proposals

FILES = {"train.py": "import torch\nx = 1\ny = 2\n", "helpers.py": "def g():\n    return 1\n"}


def python(code: str) -> str:
    """A shell command that runs ``code`` in this interpreter."""
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}"


def proposer(tmp_path, command: str, limits: Limits | None = None) -> ShellProposer:
    return ShellProposer(command, Talk(), limits or Limits(), tmp_path / "work", tmp_path, "IndexError: boom")


def test_json_lines_become_proposals_and_the_rest_is_said():
    output = "\n".join([
        json.dumps({"text": "import torch\n"}),
        json.dumps({"files": {"helpers.py": None, "train.py": "x = 1\n"}}),
        "not json",
        json.dumps({"files": {"elsewhere.py": "x = 1\n"}}),
        json.dumps({"nothing": 1}),
        json.dumps([1, 2]),
        "",
    ])
    proposals, problems = parse_proposals(output, FILES, "train.py")
    assert proposals == [Proposal({"train.py": "import torch\n"}),
                         Proposal({"helpers.py": None, "train.py": "x = 1\n"})]
    assert problems == ["line 3 is not JSON", "line 4: 'elsewhere.py' is not a file of the program",
                        'line 5: neither "text" nor "files"', "line 6: not a JSON object"]


def test_the_command_reads_the_program_and_answers_with_proposals(tmp_path):
    code = (
        "import json, os, sys\n"
        "text = sys.stdin.read()\n"
        "files = json.load(open(os.environ['SHRINKGPU_FILES']))\n"
        "assert files['main'] == os.environ['SHRINKGPU_MAIN'] == 'train.py', files\n"
        "assert files['files']['helpers.py'].startswith('def g')\n"
        "assert os.environ['SHRINKGPU_ERROR'] == 'IndexError: boom'\n"
        "for line in text.splitlines(keepends=True)[1:]:\n"
        "    print(json.dumps({'text': text.replace(line, '')}))\n"
    )
    asked = proposer(tmp_path, python(code))
    proposals = asked(FILES, "train.py")
    assert proposals == [Proposal({"train.py": "import torch\ny = 2\n"}),
                         Proposal({"train.py": "import torch\nx = 1\n"})]
    assert asked.talk.notes == []
    assert asked.calls == 1


def test_a_command_that_fails_is_skipped_with_a_note(tmp_path):
    asked = proposer(tmp_path, python("import sys; sys.stderr.write('no model here\\n'); sys.exit(3)"))
    assert asked(FILES, "train.py") == []
    assert asked.talk.notes == ["--propose-with: the command exited with 3 (no model here); skipped"]


def test_a_command_that_proposes_nothing_is_skipped_with_a_note(tmp_path):
    asked = proposer(tmp_path, "true")
    assert asked(FILES, "train.py") == []
    assert asked.talk.notes == ["--propose-with: the command proposed nothing this time; skipped"]


def test_a_command_past_its_time_is_killed_and_skipped(tmp_path, monkeypatch):
    monkeypatch.setattr(module, "PROPOSE_TIMEOUT", 3.0)
    started = time.monotonic()
    asked = proposer(tmp_path, python("import time; time.sleep(60)"))
    assert asked(FILES, "train.py") == []
    assert time.monotonic() - started < 30
    assert asked.talk.notes == ["--propose-with: the command did not finish within 3s; skipped"]


def test_no_command_is_started_without_time_left(tmp_path):
    limits = Limits(max_time=1.0)
    asked = proposer(tmp_path, python("print('{}')"), limits)
    assert asked(FILES, "train.py") == [] and asked.calls == 0
