"""The recorded figures of each suite: ``evaluation/baselines/<suite>.json``.

A baseline holds, for every case of its suite, the most recent measurement recorded
(``python -m evaluation.run --measure --save-baseline``): shrinkgpu's row, the case's
original (tokens, first error), and the run each row came from (commit, date, machine,
command).  The file's own ``commit`` and ``date`` are those of its newest row.  Cost
rows go with their case's suite; the fixtures' file also holds the parts that are about
no suite of their own (the peers, scaling, the search strategies), each row with its
commit.

docs/results.md is rendered from these files alone (``python -m evaluation.run
--render``), and a run's own markdown sets its rows beside them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from evaluation import catalog
from evaluation.report import portable

BASELINES = Path(__file__).resolve().parent / "baselines"
DROPPED_KEYS = ("output", "cwd", "workdir")  # where a run wrote on its machine
SECTIONS = ("cost", "scaling", "search")


def path_of(suite: str) -> Path:
    return BASELINES / f"{suite}.json"


def load(suite: str) -> dict | None:
    p = path_of(suite)
    return json.loads(p.read_text(encoding="utf-8")) if p.is_file() else None


def load_all() -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(BASELINES.glob("*.json"))}


def scrub(value):
    """``value`` without machine paths or the keys that only name them."""
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items() if k not in DROPPED_KEYS}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    if isinstance(value, str):
        return portable(value)
    return value


def commit_of(results: dict) -> str:
    """The short commit a run measured (its ``machine.revision`` without the dirty note)."""
    rev = (results.get("machine") or {}).get("revision") or "unknown"
    return rev.split()[0]


def run_info(results: dict) -> dict:
    m = results.get("machine") or {}
    return scrub({"date": (results.get("started") or "")[:10], "started": results.get("started"),
                  "command": results.get("command"), "machine": m, "settings": results.get("settings"),
                  "measure": results.get("measure", True)})


def _suite_of(name: str, cases: dict) -> str:
    info = cases.get(name) or {}
    if info.get("suite"):
        return info["suite"]
    try:
        return catalog.load(name).suite
    except KeyError:
        return "unknown"


def from_run(results: dict) -> dict[str, dict]:
    """A run's ``results.json`` as one record per suite, in the baselines' shape."""
    commit = commit_of(results)
    run = run_info(results)
    cases = results.get("cases") or {}
    records: dict[str, dict] = {}

    def rec(suite: str) -> dict:
        return records.setdefault(suite, {"suite": suite, "commit": commit, "date": run["date"],
                                          "runs": {commit: run}, "cases": {}, "rows": []})

    for name, info in cases.items():
        rec(_suite_of(name, cases))["cases"][name] = scrub(info)
    peer_cases = {r["case"] for r in results.get("reductions", []) if r.get("tool") != "shrinkgpu"}
    for row in results.get("reductions", []):
        row = scrub({**row, "commit": commit})
        r = rec(_suite_of(row["case"], cases))
        if row.get("tool") == "shrinkgpu":
            r["rows"].append(row)
        if row["case"] in peer_cases:
            r.setdefault("peers", {"tools": scrub(results.get("peers") or {}), "rows": []})["rows"].append(row)
    for row in results.get("cost", []):
        rec(_suite_of(row["case"], cases)).setdefault("cost", []).append(scrub({**row, "commit": commit}))
    for row in results.get("search", []):
        rec(_suite_of(row["case"], cases)).setdefault("search", []).append(scrub({**row, "commit": commit}))
    if results.get("scaling"):
        rec("fixtures")["scaling"] = [scrub({**row, "commit": commit}) for row in results["scaling"]]
    return records


def _newest(record: dict) -> None:
    """Set the record's commit and date to its newest run's, and drop runs no row names."""
    named = {r.get("commit") for r in record.get("rows", [])}
    named |= {r.get("commit") for s in SECTIONS for r in record.get(s) or ()}
    named |= {r.get("commit") for r in (record.get("peers") or {}).get("rows", [])}
    record["runs"] = {c: run for c, run in record.get("runs", {}).items() if c in named}
    if record["runs"]:
        commit, run = max(record["runs"].items(), key=lambda kv: kv[1].get("started") or kv[1].get("date") or "")
        record["commit"], record["date"] = commit, run.get("date")


def merge(old: dict | None, new: dict) -> dict:
    """``old`` with what ``new`` measured: its rows replace those of the same cases, its
    sections replace the old ones whole."""
    if old is None:
        merged = json.loads(json.dumps(new))
        _newest(merged)
        return merged
    merged = json.loads(json.dumps(old))
    merged.setdefault("runs", {}).update(new.get("runs", {}))
    merged.setdefault("cases", {}).update(new.get("cases", {}))
    measured = {r["case"] for r in new.get("rows", [])}
    merged["rows"] = [r for r in merged.get("rows", []) if r["case"] not in measured] + new.get("rows", [])
    merged["rows"].sort(key=lambda r: r["case"])
    for section in SECTIONS + ("peers",):
        if new.get(section):
            merged[section] = new[section]
    _newest(merged)
    return merged


def save(results: dict) -> list[Path]:
    """Record a measurement run's rows in the baselines of the suites it ran."""
    rev = (results.get("machine") or {}).get("revision") or ""
    if re.search(r"uncommitted", rev) or not rev:
        raise ValueError(f"a baseline names the commit that produced it; this run's is {rev!r}")
    written = []
    for suite, record in from_run(results).items():
        merged = merge(load(suite), record)
        p = path_of(suite)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(merged, indent=1, sort_keys=False) + "\n", encoding="utf-8")
        written.append(p)
    return written
