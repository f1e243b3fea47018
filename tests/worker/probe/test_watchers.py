"""probe/watchers.py with real processes: what the script's configuration reads and
argparse returned, as literals where the user's code made them, and which files it read.
"""

from __future__ import annotations

import pytest

from worker.probe.helpers import watched


def test_config_reads_are_recorded_as_literals_where_the_users_code_made_them(runner):
    pytest.importorskip("yaml")
    obs = watched(runner, """\
        import json, yaml
        with open("config.yaml") as f:
            cfg = yaml.safe_load(f)
        cfg["seed"] = 2                      # changed after the read: the record is the read
        opt = json.load(open("config.json"))
        for text in ("1", "2"):
            json.loads(text)                 # two values at one place: no literal
        """)
    loads = {(r["line"], r["function"]): r["literal"] for r in obs.loads}
    assert loads[(3, "yaml.safe_load")] == "{'model': {'in_channels': 3, 'hidden': [32, 64]}, 'seed': 1}"
    # a value from the environment stays a read of it
    assert loads[(5, "json.load")] == "{'lr': 0.1, 'root': __import__(\"os\").environ['DATA_ROOT']}"
    assert loads[(7, "json.loads")] is None


def test_a_librarys_own_reads_are_not_the_scripts_configuration(runner):
    obs = watched(runner, """\
        import json, torch
        def helper_in_user_code(s):
            return json.loads(s)
        torch.nn.Linear(2, 2)
        x = helper_in_user_code('{"a": 1}')
        """)
    # the user's helper is the caller: recorded at the helper's line, once
    assert [(r["line"], r["literal"]) for r in obs.loads] == [(3, "{'a': 1}")]


def test_a_parsed_path_into_the_runs_own_copy_is_written_relative_to_the_working_directory(runner):
    obs = watched(runner, """\
        import argparse, os
        ap = argparse.ArgumentParser()
        ap.add_argument("--config", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "config.yaml"))
        ap.add_argument("--out", default="/definitely/elsewhere/out")
        args = ap.parse_args([])
        """)
    [parse] = obs.parses
    assert parse["values"] == {"config": "'config.yaml'", "out": "'/definitely/elsewhere/out'"}


def test_a_file_the_run_makes_itself_is_not_data_it_reads(runner):
    obs = watched(runner, """\
        import os
        import torch
        os.makedirs("runs/ckpt", exist_ok=True)
        torch.save({"w": torch.ones(2)}, "runs/ckpt/model.pt")
        state = torch.load("runs/ckpt/model.pt")
        with open("log.txt", "a") as f:
            f.write("x")
        open("log.txt").read()
        open("config.json").read()
        raise SystemExit(3)
        """)
    # the checkpoint it saved and loaded, the log it appended to a file not there before:
    # its own; the configuration it only read is what a result needs beside it
    # (the script, read for its traceback, may be written in the run's first clock tick:
    # a program file either way, never data a result needs beside it)
    assert set(obs.reads) - {"s.py"} == {"config.json"}


def test_the_file_clock_is_the_one_file_systems_stamp_with():
    import os
    import tempfile

    from shrinkgpu.worker.probe.watchers import file_clock

    before = file_clock()
    with tempfile.NamedTemporaryFile() as f:
        f.write(b"x")
        f.flush()
        # a file written after the clock was read is never stamped before it
        assert os.stat(f.name).st_mtime_ns >= before
