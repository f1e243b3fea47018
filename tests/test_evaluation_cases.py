"""Every case of the evaluation and every test fixture is one folder with a ``case.toml``
of one schema (evaluation/README.md): it parses, it has the keys the runner and the
checker read, its script is there, and no two cases share a name."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ROOTS = (ROOT / "tests" / "fixtures", ROOT / "evaluation" / "cases")
CASE_FILES = sorted(p for root in ROOTS for p in root.glob("*/case.toml"))
TYPES = {"script": str, "args": list, "keep_error": str, "suite": str, "tags": list, "held_out": bool,
         "written": str, "device": str}
EXPECT = {"exception": str, "operator": str}


def test_there_are_cases_under_both_roots():
    assert {p.parents[1] for p in CASE_FILES} == set(ROOTS)


@pytest.mark.parametrize("path", CASE_FILES, ids=lambda p: p.parent.name)
def test_a_case_toml_has_the_schema_s_keys_and_its_script(path: Path):
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    for key, kind in TYPES.items():
        assert isinstance(data.get(key), kind), f"{key}: {data.get(key)!r}"
    for key, kind in EXPECT.items():
        assert isinstance((data.get("expect") or {}).get(key), kind), f"expect.{key}"
    assert all(isinstance(a, str) for a in data["args"]) and all(isinstance(t, str) for t in data["tags"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", data["written"])
    re.compile(data["keep_error"])
    assert (path.parent / data["script"]).is_file()
    if "nproc_per_node" in data:
        assert isinstance(data["nproc_per_node"], int) and data["nproc_per_node"] >= 1
    if path.parents[1] == ROOTS[0]:  # a test fixture: tuned on by construction
        assert data["suite"] == "fixtures" and "fixture" in data["tags"] and data["held_out"] is False


def test_case_names_are_unique_across_the_fixtures_and_the_evaluation():
    names = [p.parent.name for p in CASE_FILES]
    assert len(names) == len(set(names)), sorted(n for n in set(names) if names.count(n) > 1)


def test_the_pinned_cli_reaches_every_threshold_of_this_layout(monkeypatch):
    from evaluation import pinned
    from shrinkgpu.reducer import facts, state

    for module, name in ((facts, "HOT_SHARE"), (state, "LONG_RUN")):
        monkeypatch.setattr(module, name, getattr(module, name))  # put back after the test
    assert set(pinned.pin()) >= {"shrinkgpu.reducer.facts.HOT_SHARE", "shrinkgpu.reducer.state.LONG_RUN"}
    assert facts.HOT_SHARE == state.LONG_RUN == pinned.OUT_OF_REACH
