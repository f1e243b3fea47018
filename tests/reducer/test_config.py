"""reducer/config.py: what a reduction is asked, checked before any work: the pattern to
keep, the hash seed, the launch mode; each refusal with the exit code the CLI returns."""

from __future__ import annotations

import re

import pytest

from fakes import config
from shrinkgpu.reducer.config import (
    NotReproduced,
    ReduceError,
    checked_launch_mode,
    compile_pattern,
    with_hash_seed,
)


def test_the_error_to_keep_is_a_regular_expression_or_a_usage_error():
    assert compile_pattern(None) is None
    assert compile_pattern("out of (bounds|range)").search("Target 4 is out of bounds.")
    with pytest.raises(ReduceError, match="--keep-error is not a valid regular expression") as caught:
        compile_pattern("Target [")
    assert caught.value.exit_code == 2


def test_a_hash_seed_goes_into_every_runs_environment(tmp_path):
    asked = config(tmp_path / "train.py", env={"PATH": "/bin"}, hash_seed="7")
    seeded = with_hash_seed(asked)
    assert seeded.env == {"PATH": "/bin", "PYTHONHASHSEED": "7"} and seeded.hash_seed == 7
    assert asked.env == {"PATH": "/bin"}
    unseeded = config(tmp_path / "train.py")
    assert with_hash_seed(unseeded) is unseeded
    drawn = with_hash_seed(config(tmp_path / "train.py", env={}, hash_seed="original"))
    assert drawn.env == {"PYTHONHASHSEED": str(drawn.hash_seed)} and 1 <= drawn.hash_seed < 2**32 - 1


def test_a_hash_seed_that_is_no_seed_is_a_usage_error(tmp_path):
    for seed, said in (("abc", "--hash-seed takes a number or 'original', not 'abc'"),
                       ("4294967296", "--hash-seed must be between 0 and 4294967295")):
        with pytest.raises(ReduceError, match=re.escape(said)) as caught:
            with_hash_seed(config(tmp_path / "train.py", hash_seed=seed))
        assert caught.value.exit_code == 2


def test_the_launch_mode_is_one_of_three(tmp_path):
    assert checked_launch_mode(config(tmp_path / "train.py")) == "auto"
    assert checked_launch_mode(config(tmp_path / "train.py", sync_launches="never")) == "never"
    with pytest.raises(ReduceError, match="--sync-launches takes auto, always, never, not 'sometimes'"):
        checked_launch_mode(config(tmp_path / "train.py", sync_launches="sometimes"))


def test_a_script_that_does_not_fail_as_asked_exits_three_with_what_it_did():
    refusal = NotReproduced("the script ran without error", observation=None)
    assert isinstance(refusal, ReduceError) and refusal.exit_code == 3
    assert str(refusal) == "the script ran without error"
