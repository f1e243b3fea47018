"""End to end on the bundled fixtures: real workers, real torch, the whole reduction.

For every fixture the reduced script must (a) fail under plain ``python`` with the same
first error -- class, message, operator and tensor metadata -- as the original, (b) keep
at most 30% of the input's tokens (a loose bound: the fixtures are what the passes were
first written on, so a bound tuned to each would say little about other scripts; the
ratio to the hand-made ``ideal_cut.py`` is recorded, not asserted), (c) leave the
fixture directory byte-identical; the multi-file fixture must come out as one
self-contained file; and (d) the extracted call must fail with the same signature in a
fresh interpreter in at most 8 lines beyond its imports.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import FIXTURE_NAMES, load_fixture, tree_digest
from shrinkgpu.readability import orphaned_comments, placeholders
from shrinkgpu.reducer import ReduceConfig, reduce, run_once
from shrinkgpu.reducer.resume import PAYLOAD
from shrinkgpu.signature import normalize_message
from shrinkgpu.syntax import count_tokens
from shrinkgpu.worker import Isolation

# (a fixture is a short script however loaded the machine: conftest.py)
pytestmark = pytest.mark.usefixtures("short_scripts_stay_short")

MAX_RATIO = 0.30
MAX_EXTRACTED_LINES = 8


@pytest.mark.slow
@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_fixture_reduces_to_a_faithful_small_script(name, tmp_path, record_property, monkeypatch):
    fx = load_fixture(name)
    before = tree_digest(fx.dir)
    out = tmp_path / "out" / f"{Path(fx.script).stem}.min.py"
    out.parent.mkdir()
    # The user's temporary directory, for the reducer and for everything it starts.
    user_tmp = tmp_path / "user-tmp"
    user_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(user_tmp))

    result = reduce(
        ReduceConfig(
            script=fx.path, args=fx.args, keep_error=fx.keep_error, output=out, cwd=fx.dir, verify_runs=1,
            env={**os.environ, "TMPDIR": str(user_tmp)},
            # The search order depends on how many candidates run at once: fixed here so
            # the result is the same on every machine.
            jobs=2,
        )
    )

    # (c) the user's files are sacred, and nothing is left in their temporary directory
    assert tree_digest(fx.dir) == before
    assert sorted(p.name for p in user_tmp.iterdir()) == []
    # The default isolation is the fork server, and it did not give up on anything.
    assert result.isolation is Isolation.FORK, result.notes
    # (notes on the state or the cut start say where they were checked: a fresh interpreter)
    assert not [n for n in result.notes if "not preloaded" in n], result.notes
    # the original's first error is the one the fixture documents
    assert result.signature.type == fx.exception
    assert result.signature.op is not None and result.signature.op.name == fx.operator
    # one self-contained file, even for the multi-file fixture
    assert result.output == out and out.is_file()
    assert result.report is not None and result.report.is_file()
    stem = out.name.removesuffix(".min.py")
    written = sorted(p.name for p in out.parent.iterdir())
    assert {out.name, f"{stem}.min.md", f"{stem}.min.json", f"{stem}.extracted.py"} <= set(written), written
    # besides those, only data the results load (the extracted call's tensors, a saved
    # call, a data object the result loads and names, the state it starts from and its
    # record), and the original's first run kept for --resume when it took long enough to
    # be worth keeping (on a loaded machine even a fixture's can)
    loaded = {o[0] for o in result.loaded_objects} | {Path(p).name for p in result.data_files.values()}
    if result.state is not None:
        loaded |= {f"{stem}.min.state.json", f"{stem}.min.state.files"}
    if (out.parent / f"{stem}.min.first" / PAYLOAD).is_file():
        loaded.add(f"{stem}.min.first")
    assert all(n.endswith(".pt") or n in loaded for n in set(written) - {out.name, f"{stem}.min.md", f"{stem}.min.json",
                                                                       f"{stem}.extracted.py"}), written
    # (b) small
    assert result.tokens_after <= MAX_RATIO * result.tokens_before, (
        f"{name}: {result.tokens_after}/{result.tokens_before} tokens\n{out.read_text()}"
    )
    # (a) plain python, in a directory holding nothing but the output
    plain = subprocess.run([sys.executable, out.name], cwd=out.parent, capture_output=True, text=True, timeout=120)
    assert plain.returncode != 0
    # The traceback Python prints names the root error (numbers in it may differ: the
    # same bug may report another out-of-range value; the tensor metadata pins it).
    printed = [line for line in plain.stderr.splitlines() if line.startswith(f"{fx.exception}: ")]
    assert printed, plain.stderr
    assert any(normalize_message(line.split(": ", 1)[1]) == result.signature.normalized for line in printed)
    # ... and the same bug by the signature's rule, seen by a fresh worker
    obs, _ = run_once(ReduceConfig(script=out, cwd=out.parent), isolation=Isolation.FRESH)
    assert obs.signature is not None
    assert result.signature.same_bug(obs.signature,
                                     free=frozenset(result.varying)), result.signature.differences(obs.signature)

    # (d) the failing call alone, checked here again in a fresh worker of its own
    assert result.extracted is not None, result.notes
    extracted = result.extracted.path
    assert result.extracted.lines <= MAX_EXTRACTED_LINES, extracted.read_text()
    obs, _ = run_once(ReduceConfig(script=extracted, cwd=extracted.parent), isolation=Isolation.FRESH)
    assert obs.signature is not None and result.signature.same_bug(obs.signature, free=frozenset(result.varying)), (
        extracted.read_text())

    # (e) it reads like a hand-written cut (issue 24): no comment left without its code,
    # no placeholder the original did not have
    originals = [p.read_text(encoding="utf-8") for p in fx.dir.glob("*.py") if p.name != "ideal_cut.py"]
    assert orphaned_comments(out.read_text()) == [], out.read_text()
    assert placeholders(out.read_text(), originals) == [], out.read_text()

    # (f) one change at a time, on real runs: the kind the fixture's story says
    if fx.kind is not None:
        assert result.ablation is not None and result.ablation.kind == fx.kind, result.ablation

    # Against the hand-made cut: recorded for every fixture (``-rA`` or the junit
    # properties show it), not asserted.
    ideal = count_tokens((fx.dir / "ideal_cut.py").read_text())
    ratio = result.tokens_after / ideal
    record_property("ideal_tokens", ideal)
    record_property("ideal_ratio", round(ratio, 3))
    print(f"{name}: {result.tokens_after} tokens, ideal cut {ideal}, ratio {ratio:.2f}, "
          f"extracted {result.extracted.lines} lines")
