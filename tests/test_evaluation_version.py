"""Which shrinkgpu evaluation.run calls (evaluation/version.py): another commit's src/,
checked to be the one that imports, and the pinned settings two versions are diffed with."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # evaluation/ is a top-level package of the repository, not installed
    sys.path.insert(0, str(ROOT))

from evaluation import run, version  # noqa: E402


def head() -> str:
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")


def test_without_a_commit_or_pins_the_installed_shrinkgpu_runs_as_it_is(tmp_path):
    how = version.resolve(None, False, tmp_path)
    assert how is version.INSTALLED
    assert how.command("reduce")[1:] == ["-m", "shrinkgpu", "reduce"]
    assert how.env is None and how.flags == ()
    assert list(tmp_path.iterdir()) == []


def test_a_commit_runs_its_own_src_pinned_with_one_hash_seed(tmp_path):
    sha = head()
    how = version.resolve("HEAD", True, tmp_path)
    assert how.commit == sha
    assert how.src == tmp_path / f"src-{sha[:12]}" / "src"
    assert (how.src / "shrinkgpu" / "cli").is_dir()
    assert how.command("reduce")[1:] == ["-m", "evaluation.pinned", "reduce"]
    assert how.flags == ("--hash-seed", "0")
    assert how.env["PYTHONHASHSEED"] == "0"
    # from a folder that is not the repository (a case's copy), the commit's package is
    # the one that imports, and the pinned CLI is found
    found = subprocess.run([sys.executable, "-c", "import shrinkgpu, evaluation.pinned; print(shrinkgpu.__file__)"],
                           capture_output=True, text=True, env=how.env, cwd=tmp_path, check=True).stdout.strip()
    assert Path(found).is_relative_to(how.src)
    assert how.describe() == {"commit": sha, "pinned": True, "src": str(how.src)}


def test_a_commit_git_cannot_read_is_refused_with_its_name(tmp_path):
    head()
    with pytest.raises(version.VersionError, match="--commit no-such-rev-here: git could not read it"):
        version.resolve("no-such-rev-here", False, tmp_path)
    assert not any(tmp_path.glob("src-*"))


def test_a_baseline_is_never_saved_from_another_version_or_pinned_thresholds(capsys):
    for flag in (["--commit", "HEAD"], ["--pinned"]):
        with pytest.raises(SystemExit) as exc:
            run.parse_args(["--measure", "--save-baseline", *flag])
        assert exc.value.code == 2
        assert "not with --commit or --pinned" in capsys.readouterr().err
