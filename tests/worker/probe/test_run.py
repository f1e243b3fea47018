"""probe/run.py through its fresh-interpreter entry point (``probe.main REQUEST.json``),
without torch (``capture_ops=False``): the script runs as ``python SCRIPT ARGS`` would,
its traceback is Python's without the probe's frames, its exit is Python's, and the
report says how it ended."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from shrinkgpu.worker.protocol import RunRequest, Watch


@pytest.fixture
def probe(tmp_path):
    def run(text: str, watch: Watch = Watch()):
        (tmp_path / "s.py").write_text(text)
        request = RunRequest(script=str(tmp_path / "s.py"), argv=("s.py", "--n", "2"), cwd=str(tmp_path),
                             observation=str(tmp_path / "obs.json"), crash_log=str(tmp_path / "crash.txt"),
                             roots=(str(tmp_path),), capture_ops=False, watch=watch)
        (tmp_path / "request.json").write_text(json.dumps(request.to_json()))
        done = subprocess.run([sys.executable, "-c", "from shrinkgpu.worker.probe import main; main()",
                               str(tmp_path / "request.json")], cwd=tmp_path, capture_output=True, text=True,
                              timeout=60)
        return done, json.loads((tmp_path / "obs.json").read_text())

    return run


def test_an_exception_is_reported_with_its_frame_and_printed_as_python_prints_it(probe, tmp_path):
    done, report = probe('import sys\nprint("argv", sys.argv[1:])\ndef f():\n    raise ValueError("bad batch")\nf()\n')
    assert (done.returncode, done.stdout) == (1, "argv ['--n', '2']\n")
    assert done.stderr == (f'Traceback (most recent call last):\n  File "{tmp_path / "s.py"}", line 5, in <module>\n'
                           f'    f()\n  File "{tmp_path / "s.py"}", line 4, in f\n    raise ValueError("bad batch")\n'
                           "ValueError: bad batch\n")
    assert (report["status"], report["exit_code"], report["probe_error"]) == ("exception", 1, None)
    assert [(c["type"], c["message"], c["frame"]) for c in report["chain"]] == [
        ("ValueError", "bad batch",
         {"file": "s.py", "line": 4, "function": "f", "source": 'raise ValueError("bad batch")',
                                     "callee": None})]


def test_an_error_raised_in_a_call_names_the_callable_as_the_source_spells_it(probe):
    # a library's constructor refusing its arguments, as a method of the user's builds it
    _, report = probe("import json\nclass M:\n    def __init__(self, text):\n"
                      "        self.config = dict(a=1,\n            **json.loads(text))\nM('{')\n")
    frame = report["chain"][-1]["frame"]
    assert (frame["line"], frame["function"], frame["callee"]) == (5, "__init__", "json.loads")


def test_sys_exit_ends_the_run_as_it_ends_python(probe):
    done, report = probe("raise SystemExit(3)\n")
    assert (done.returncode, done.stderr, report["status"], report["exit_code"]) == (3, "", "exit", 3)
    done, report = probe('raise SystemExit("stop here")\n')  # a message: printed, and status 1
    assert (done.returncode, done.stderr, report["status"], report["exit_code"]) == (1, "stop here\n", "exit", 1)


def test_a_script_that_ends_normally_is_ok_with_no_chain(probe):
    done, report = probe('print("done")\n')
    assert (done.returncode, done.stdout, done.stderr) == (0, "done\n", "")
    assert (report["status"], report["exit_code"], report["chain"]) == ("ok", 0, [])


def test_asked_for_them_the_files_the_run_wrote_are_kept_when_it_ends(tmp_path):
    # A training loop saved its best checkpoint, then the evaluation after it failed.
    from shrinkgpu.worker.protocol import Watch

    (tmp_path / "data.txt").write_text("the user's data, there before the run")
    (tmp_path / "s.py").write_text(
        "import os\nos.makedirs('checkpoints', exist_ok=True)\n"
        "open('checkpoints/best.pt', 'w').write('weights')\nopen('data.txt').read()\n"
        "raise RuntimeError('Error(s) in loading state_dict')\n")
    kept = tmp_path.parent / f"{tmp_path.name}-kept"
    request = RunRequest(script=str(tmp_path / "s.py"), argv=("s.py",), cwd=str(tmp_path),
                         observation=str(tmp_path.parent / "obs.json"), crash_log=str(tmp_path.parent / "crash.txt"),
                         roots=(str(tmp_path),), capture_ops=False,
                         watch=Watch(written=str(kept)))
    (tmp_path.parent / "request.json").write_text(json.dumps(request.to_json()))
    subprocess.run([sys.executable, "-c", "from shrinkgpu.worker.probe import main; main()",
                    str(tmp_path.parent / "request.json")], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    report = json.loads((tmp_path.parent / "obs.json").read_text())
    assert report["written"] == {"files": ["checkpoints/best.pt"], "files_bytes": 7}
    assert (kept / "checkpoints" / "best.pt").read_text() == "weights"
    assert not (kept / "data.txt").exists()  # read, not written


def test_the_first_error_is_written_as_it_leaves_the_script_when_slow_work_follows(probe, tmp_path):
    # The original's first run saves what the search needs after its error (here the
    # modules it imported): its first error is on disk before that, so a run the limit
    # stops there still says it.  A candidate's report follows its error at once.
    probe('raise IndexError("Target 4 is out of bounds.")\n', Watch(collect_modules=True))
    first = json.loads((tmp_path / "obs.json.first").read_text())
    assert (first["status"], [c["message"] for c in first["chain"]]) == ("exception", ["Target 4 is out of bounds."])
    (tmp_path / "obs.json.first").unlink()
    probe('raise IndexError("Target 4 is out of bounds.")\n')
    assert not (tmp_path / "obs.json.first").exists()
