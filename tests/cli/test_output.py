"""cli/output.py: under --json, stdout holds the one JSON object whatever else writes to it."""

from __future__ import annotations

import json
import subprocess
import sys

NOISY = """\
import os, threading
from shrinkgpu.cli.output import emit_json, json_stdout

json_stdout()
print("a library's print")
os.write(1, b"a C library's write\\n")
t = threading.Thread(target=lambda: print("a background thread's print (Ray's raylet log)"))
t.start(); t.join()
subprocess_out = __import__("subprocess").run(["echo", "a child process's output"])
emit_json({"ok": True})
"""


def test_stdout_is_the_json_object_alone_and_the_rest_goes_to_stderr():
    done = subprocess.run([sys.executable, "-c", NOISY], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"ok": True}
    assert done.stdout.count("{") == 1
    for line in ("a library's print", "a C library's write", "a background thread's print (Ray's raylet log)",
                 "a child process's output"):
        assert line in done.stderr


def test_the_command_line_keeps_it_for_an_error_too(tmp_path):
    done = subprocess.run([sys.executable, "-m", "shrinkgpu", "run", str(tmp_path / "missing.py"), "--json"],
                          capture_output=True, text=True, timeout=120)
    data = json.loads(done.stdout)
    assert data["exit_code"] == done.returncode != 0 and "missing.py" in data["error"]
