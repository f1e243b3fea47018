"""``reduce --propose-with CMD`` end to end: a toy proposer (tests/data/agents/delete_a_line.py
deletes a random line) joins the class_index fixture's reduction as its last tier; the
result is the same bug and no larger than the reduction's without it.  A proposer that
crashes is skipped with a note, and the reduction goes on (issue 49)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from conftest import ROOT, load_fixture
from shrinkgpu.reducer import ReduceConfig, reduce

pytestmark = pytest.mark.usefixtures("short_scripts_stay_short")

FIXTURE = load_fixture("class_index")
PROPOSERS = ROOT / "tests" / "data" / "agents"


def proposer(name: str) -> str:
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(PROPOSERS / name))}"


@pytest.fixture(autouse=True)
def one_path_whatever_the_load(monkeypatch):
    # Whether a loop was worth cutting first once depended on how long the runs took (a
    # share of a run of at least a second): this fixture's runs were near it, and on a
    # loaded machine the two reductions parted ways before the proposer's tier (CI: 315
    # tokens with the proposer, 102 without, twice).  It is a count now (issue 58); the
    # two reductions here still start without hot loops, as evaluation.pinned sets it.
    import shrinkgpu.reducer.facts as facts
    import shrinkgpu.reducer.search as search

    monkeypatch.setattr(facts, "HOT_SHARE", 1e12)
    # and the loops counted again at every rebase, however long a run took
    monkeypatch.setattr(search, "RECOUNT_MAX_STARTUPS", 1e12)


def reduced(tmp_path: Path, name: str, script: Path = FIXTURE.path, **kw):
    out = tmp_path / name / f"{script.stem}.min.py"
    out.parent.mkdir()
    # jobs fixed: the search order depends on it, so both reductions take the same path
    # until the proposer's tier; and a generous candidate limit: one that timed out under
    # a loaded machine (CI, two reductions at once) would send one of them another way
    config = ReduceConfig(script=script, keep_error=FIXTURE.keep_error, output=out, cwd=script.parent,
                          verify_runs=1, jobs=2, ablate=False, extract=False, timeout=60.0, **kw)
    return reduce(config)


@pytest.mark.slow
def test_a_toy_proposer_keeps_the_bug_and_never_makes_the_result_larger(tmp_path):
    without = reduced(tmp_path, "without")
    with_it = reduced(tmp_path, "with", propose_with=proposer("delete_a_line.py"))
    for result in (without, with_it):
        assert result.stopped is None
        assert result.verified == (1, 1)
        assert result.final_signature is not None and result.signature.same_bug(result.final_signature)
    assert with_it.signature.same_bug(without.signature)
    said = (f"{with_it.tokens_after} tokens with the proposer, {without.tokens_after} without\n"
            f"with: {with_it.trace[-6:]} {with_it.notes}\nwithout: {without.trace[-6:]} {without.notes}")
    # The search's own best: the proposer's tier comes after the fixpoint of the others
    # and only ever accepts smaller programs.
    assert with_it.trace[-1][1] <= without.trace[-1][1], said
    # The written result too, unless a fresh check of either fell back to an older program
    # (on a loaded machine a fresh run can time out; verification.verify_history).
    if not any("fell back" in note for note in (*with_it.notes, *without.notes)):
        assert with_it.tokens_after <= without.tokens_after, said
    # the proposals were judged like every pass's candidates
    assert with_it.passes["external"]["tests"] > 0, with_it.passes
    assert "external" not in without.passes
    print(f"tokens: {without.tokens_before} -> {without.tokens_after} without, {with_it.tokens_after} with "
          f"({with_it.passes['external']})")


@pytest.mark.slow
def test_a_proposer_that_crashes_is_skipped(tmp_path):
    result = reduced(tmp_path, "crash", script=FIXTURE.dir / "ideal_cut.py", propose_with=proposer("crash.py"))
    assert result.stopped is None and result.verified == (1, 1)
    assert any(n.startswith("--propose-with: the command exited with 1 (RuntimeError: the model server is down)")
               for n in result.notes), result.notes
    assert "external" not in result.passes  # nothing of it was judged
