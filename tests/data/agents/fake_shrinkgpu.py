"""A stand-in for ``python -m shrinkgpu COMMAND --json`` in the agents' tests: it says its
progress as ``--progress-json`` does (and a plain ``shrinkgpu:`` stage, as ``check``
does), then answers with JSON on stdout.

    fake_shrinkgpu.py MODE OUTDIR [ARGV...]

MODE: ``end`` answers at once; ``wait`` runs until SIGINT, then writes its partial result
and exits 130 as an interrupted reduction does; ``fail`` exits 2 with an error; ``slow``
says one more stage after ``SLOW`` seconds, then answers; ``stubborn`` ignores SIGINT
and starts a grandchild in its process group.  The answer echoes ARGV and the variables
the tests set, so a test can read what the server ran.
"""

import json
import os
import signal
import subprocess
import sys
import time

SLOW = 1.5
mode, out, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
result = os.path.join(out, "x.min.py")


def say(**event):
    sys.stderr.write(json.dumps(event) + "\n")
    sys.stderr.flush()


def answer(code, **data):
    env = {k: os.environ.get(k) for k in ("SHRINKGPU_TEST_VAR", "SHRINKGPU_TEST_GONE", "SHRINKGPU_MCP_PARENT")}
    # (``notes`` too: what ``reduce`` answers keeps that key, not ``argv``)
    print(json.dumps({**data, "argv": argv, "notes": argv, "env": env, "exit_code": code}, indent=2))
    sys.stdout.flush()
    sys.exit(code)


def stopped(*_):
    with open(result, "w") as f:
        f.write("# partial\nx = 1\n")
    answer(130, output=result, tokens_before=30, tokens_after=12, stopped_early=True, stop_reason="interrupted")


signal.signal(signal.SIGINT, signal.SIG_IGN if mode == "stubborn" else stopped)
say(event="stage", seconds=0.1, message="running the original in a fresh interpreter")
say(event="reducing", seconds=0.2, tokens=30, lines=5)
say(event="pass", seconds=0.3, name="delete-statements", level=0, units=4)
say(event="tested", seconds=0.4, tests=3, accepted=1)
say(event="best", seconds=0.5, tokens=12, lines=2, main="x.py", files={"x.py": "import torch\nx = 1\n"})
sys.stderr.write("a line that is not progress\n")
sys.stderr.write("shrinkgpu: running the candidate 3 times\n")
sys.stderr.flush()
if mode == "stubborn":
    grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    print(grandchild.pid, flush=True)
if mode in ("wait", "stubborn"):
    while True:
        time.sleep(0.05)
if mode == "fail":
    answer(2, error="bad option")
if mode == "slow":
    time.sleep(SLOW)
    say(event="stage", seconds=SLOW + 0.5, message="verifying the result in fresh interpreters")
with open(result, "w") as f:
    f.write("x = 1\n")
answer(0, output=result, tokens_before=30, tokens_after=3, stopped_early=False, stop_reason=None)
