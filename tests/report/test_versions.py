"""The report's *Versions*: torch's ``collect_env`` in a process of its own, reused for an
hour by the reductions that follow with the same interpreter, packages and device
variables.  Real processes, real torch."""

from __future__ import annotations

import os
import sys
import time

from shrinkgpu.report.versions import COLLECT_ENV_REUSE_SECONDS, CollectEnv


def test_collect_env_runs_once_and_the_next_reduction_reads_its_text(tmp_path):
    first = CollectEnv(sys.executable, dict(os.environ), cache_dir=tmp_path)
    assert first.proc is not None
    text = first.result()
    assert text is not None and "PyTorch version" in text
    again = CollectEnv(sys.executable, dict(os.environ), cache_dir=tmp_path)
    assert again.proc is None and again.result() == text  # no process: the text kept
    # another device selection is another environment: run again
    other = CollectEnv(sys.executable, {**os.environ, "CUDA_VISIBLE_DEVICES": "7"}, cache_dir=tmp_path)
    assert other.proc is not None
    other.close()


def test_a_text_older_than_the_reuse_time_is_collected_again(tmp_path):
    first = CollectEnv(sys.executable, dict(os.environ), cache_dir=tmp_path)
    assert first.result() is not None
    (kept,) = tmp_path.iterdir()
    old = time.time() - COLLECT_ENV_REUSE_SECONDS - 60
    os.utime(kept, (old, old))
    again = CollectEnv(sys.executable, dict(os.environ), cache_dir=tmp_path)
    assert again.proc is not None
    again.close()
