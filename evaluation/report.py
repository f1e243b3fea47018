"""Tables of results, and docs/results.md.

Everything here is a function of recorded results: a run's ``results.json``, turned into
one record per suite by ``baselines.from_run``, or the suites' baseline files
(``evaluation/baselines/<suite>.json``).  ``render`` writes the same document for both:
a table per suite (the fixtures first), then the candidate cost, the peers, scaling and
the search strategies where the records hold them.  docs/results.md is ``render`` of the
baselines and nothing else; what the columns mean is in evaluation/README.md.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

COST_TARGET = 50.0
IDEAL_TARGET = 1.25  # output tokens / the case's hand-made ideal_cut.py tokens
SHARE_TARGET = 0.30  # issue 10: a result at <= 30% of the original's tokens
ABLATION_TARGET = 0.10  # issue 22: the comparisons after the search add <= 10%
PEER_ORDER = {"shrinkgpu": 0, "pysource-minimize": 1, "picire": 2, "lithium": 3, "shrinkray": 4}
LOST_TO = ("NameError", "UnboundLocalError", "ImportError", "ModuleNotFoundError")
REPO = Path(__file__).resolve().parents[1]


# -- formatting -----------------------------------------------------------------------------
def _s(x, fmt="{:.1f}") -> str:
    if x is None:
        return "-"
    return fmt.format(x)


def _oneline(s: str, n: int) -> str:
    s = re.sub(r"\s+", " ", s or "").replace("|", "\\|")
    return s if len(s) <= n else s[: n - 3] + "..."


_MACHINE_PATH = re.compile(r"(?<![\w.:/~-])/(?:[\w.+-]+/)+[\w.+-]*")


def portable(text: str) -> str:
    """``text`` without the paths of the machine it was written on: the repository's own
    become relative, an interpreter ``python``, any other absolute path ``DIR``
    (``/dev/null`` stays)."""
    text = (text or "").replace(str(REPO) + "/", "")

    def replace(m: re.Match) -> str:
        path = m.group(0)
        if path.startswith("/dev/"):
            return path
        return "python" if re.fullmatch(r"python[\d.]*", path.rsplit("/", 1)[-1]) else "DIR"

    return _MACHINE_PATH.sub(replace, text)


def _table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def repro_ok(row: dict) -> bool:
    r = row.get("reproduce")
    if not r:
        return False
    k, n = map(int, r.split("/"))
    return n > 0 and k == n


def _repro(row: dict) -> str:
    if not row.get("reproduce"):
        return "-"
    how = ", its own checks" if row.get("reproduce_by") == "shrinkgpu" else ""
    return f"{'yes' if repro_ok(row) else 'no'} ({row['reproduce']}{how})"


def result_line(row: dict, case: dict) -> str:
    """One machine-readable line per result (also what the smoke test parses)."""
    if row.get("error") and row.get("tokens") is None:
        return f"tool={row.get('tool')} case={row.get('case')} error={row['error'][:200]!r}"
    ideal = case.get("ideal_tokens")
    calls = row.get("calls")
    runs = row.get("runs")
    repro = row.get("reproduce") or "-"
    return (
        f"tool={row.get('tool')} case={row.get('case')} wall={_s(row.get('wall'))}s "
        f"calls={calls if calls is not None else '-'}" + (f" runs={runs}" if runs is not None else "")
        + f" tokens={row.get('tokens')} ideal={ideal if ideal is not None else '-'} "
        f"reproduce={'yes' if repro_ok(row) else 'no'}({repro}) capped={'yes' if row.get('capped') else 'no'}"
    )


def _waste(row: dict) -> str:
    """The share of a tool's calls lost to a NameError and its kin (a definition deleted
    before its use)."""
    if row.get("lost_share") is not None:  # converted from a table that held only the share
        return row["lost_share"]
    et = row.get("error_types") or {}
    calls = row.get("calls")
    if not calls:
        return "-"
    lost = sum(v for k, v in et.items() if k in LOST_TO)
    return f"{100 * lost / calls:.0f}%"


def _note(row: dict) -> str:
    parts = []
    if row.get("note"):
        parts.append(row["note"])
    if row.get("tool") == "shrinkgpu":
        if row.get("stopped"):
            parts.append(f"stopped: {row['stopped']}")
        if row.get("isolation") and row["isolation"] != "fork":
            parts.append(f"isolation {row['isolation']}")
        parts += [n for n in row.get("notes") or () if "candidates at once on" not in n]
    else:
        if row.get("output_source"):
            parts.append(f"output: {row['output_source']}")
        if row.get("exit") not in (None, 0):
            parts.append(f"exit {row['exit']}")
        parts += row.get("warnings", [])
    if row.get("error"):
        parts.append("error: " + row["error"])
    return portable("; ".join(parts))


def _extracted(row: dict) -> str:
    """The extracted call: its lines beyond the imports, or why there is none."""
    ext = row.get("extracted")
    if ext:
        return f"{ext.get('lines')} lines ({ext.get('level')})"
    if row.get("extract_error"):
        return "none: " + _oneline(row["extract_error"], 80)
    return "-"


def _loaded(row: dict) -> str:
    """The data objects a result loads from beside itself, which its tokens leave out."""
    parts = [f"`{o['name']}` from {o['bytes'] / 2**20:.1f} MiB pickle" for o in row.get("loaded_objects") or ()]
    return f" + loads {', '.join(parts)}" if parts else ""


def _tokens(tokens, total) -> str:
    if tokens is None:
        return "-"
    return f"{tokens}" + (f" ({100 * tokens / total:.0f}%)" if total else "")


# -- one suite ----------------------------------------------------------------------------------
def is_long(info: dict, row: dict) -> bool:
    return "long" in (info.get("tags") or ()) or "original_seconds" in row


def suite_table(record: dict, against: dict | None = None) -> str:
    """shrinkgpu on each case of one suite.  Long cases add when the user had the
    extracted call and a result at <= 30% of the tokens.  ``against``: a baseline record
    of the same suite, whose figures are set beside these."""
    cases = record.get("cases", {})
    rows_in = sorted(record.get("rows", []), key=lambda r: r.get("case", ""))
    long = any(is_long(cases.get(r.get("case"), {}), r) for r in rows_in)
    before = {r["case"]: r for r in (against or {}).get("rows", [])}

    def when(seconds, target) -> str:
        if target is None:
            return "-"
        if seconds is None:
            return f"not reached (target {target:.0f})"
        return f"{seconds:.0f} ({'met' if seconds <= target else 'missed'}, target {target:.0f})"

    rows = []
    for r in rows_in:
        f = cases.get(r["case"], {})
        tokens, total, ideal = r.get("tokens"), r.get("tokens_before") or f.get("tokens"), f.get("ideal_tokens")
        share = tokens / total if tokens is not None and total else None
        calls = "-" if r.get("calls") is None else str(r["calls"]) + (f" ({r['runs']})" if r.get("runs") else "")
        row = [r["case"], _s(total, "{}"), _s(ideal, "{}"),
               _tokens(tokens, total) + _loaded(r),
               "-" if tokens is None or not ideal else f"{tokens / ideal:.1f}x",
               "-" if share is None else ("met" if share <= SHARE_TARGET else "missed"),
               _s(r.get("wall")) + (" (capped)" if r.get("capped") else ""), calls, _waste(r), _repro(r)]
        if long:
            row += [_s(r.get("original_seconds"), "{:.0f}"), when(r.get("extracted_after"), r.get("extract_target")),
                    when(r.get("small_after"), r.get("small_target"))]
        else:
            row.append(_extracted(r))
        if against is not None:
            b = before.get(r["case"])
            row.append("-" if not b or b.get("tokens") is None else
                       f"{b['tokens']}, {_s(b.get('wall'))} s at {b.get('commit', '?')}")
        row += [f"`{r.get('commit', '?')}`", _oneline(_note(r), 200) or "-"]
        rows.append(row)
    head = ["case", "tokens", "ideal cut", "shrinkgpu tokens", "vs ideal", f"<= {SHARE_TARGET:.0%}", "wall s",
            "candidates (runs)", "lost to Name/Unbound/ImportError", "reproduce"]
    head += ["original s", "extracted call after s", f"<= {SHARE_TARGET:.0%} of the tokens after s"] if long \
        else ["extracted call"]
    if against is not None:
        head.append("baseline: tokens, s")
    head += ["commit", "notes"]
    return _table(head, rows)


def cases_table(record: dict) -> str:
    """What each case's original is: script, size, its first error as the run saw it."""
    rows = []
    for name, f in sorted(record.get("cases", {}).items()):
        if "skipped" in f or "error" in f:
            rows.append([name, "-", "-", "-", "-",
                         f.get("skipped") or ("error: " + _oneline(portable(f["error"]), 200))])
            continue
        if "script" not in f:
            continue
        modules = f" + {', '.join(f['local_modules'])}" if f.get("local_modules") else ""
        lines = f" ({f['lines']} lines{modules})" if f.get("lines") else ""
        first = f"{f.get('first_error')} at {f.get('operator')}" if f.get("first_error") else "-"
        if f.get("first_error") and f.get("matches_case") is False:
            first += f" (case.toml expects {f.get('expected')})"
        rows.append([name, f"{f['script']}{lines}", _s(f.get("tokens"), "{}"), _s(f.get("ideal_tokens"), "{}"),
                     _s(f.get("fresh_seconds"), "{:.2f}"), _oneline(first, 200)])
    return _table(["case", "script", "tokens", "ideal_cut tokens", "fresh run s", "first error (reference signature)"],
                  rows)


def ablation_table(rows_in: list[dict]) -> str | None:
    """What the comparisons after the search cost, against the rest of the reduction
    (issue 22's target: at most 10% more), and the kind each found."""
    rows = []
    for r in rows_in:
        a = r.get("ablation")
        if r.get("tool") != "shrinkgpu" or not a or not r.get("seconds"):
            continue
        share = a["seconds"] / (r["seconds"] - a["seconds"]) if r["seconds"] > a["seconds"] else None
        passing = [name for name, outcome in a["changes"].items() if outcome == "passes"]
        rows.append([r["case"], str(a["kind"]), str(len(a["changes"])), ", ".join(passing) or "none",
                     f"{a['seconds']:.2f}", f"{r['seconds']:.1f}",
                     "-" if share is None
                     else f"{100 * share:.1f}% ({'met' if share <= ABLATION_TARGET else 'missed'})"])
    if not rows:
        return None
    return _table(["case", "kind", "changes", "passing", "ablation s", "reduction s (all)",
                   f"added to the rest (<= {ABLATION_TARGET:.0%})"], rows)


# -- the parts that are not suites ------------------------------------------------------------
def cost_table(rows_in: list[dict]) -> str:
    rows = []
    for r in rows_in:
        ms = lambda k, r=r: f"{r[k] * 1000:.0f}" if r.get(k) is not None else "-"  # noqa: E731
        rows.append([
            r["case"], r["candidate"], str(r["tokens"]), ms("fork_median"), ms("fork_script_median"),
            ms("fresh_median"), _s(r.get("ratio")) + "x", "met" if (r.get("ratio") or 0) >= COST_TARGET else "missed",
            f"{r.get('fork_reproduced')}/{r.get('fork_runs')} / {r.get('fresh_reproduced')}/{r.get('fresh_runs')}",
            f"{r.get('preload_modules')} modules, {r.get('preload_seconds')} s"
            + (f"; dropped {len(r['preload_dropped'])}" if r.get("preload_dropped") else "")
            + ("" if r.get("fork_isolation", "fork") == "fork" else f"; fell back to {r.get('fork_isolation')}"),
            f"`{r.get('commit', '?')}`",
        ])
    return _table(["case", "candidate", "tokens", "fork ms (median)", "of which script ms", "fresh ms (median)",
                   "fresh/fork", f"target {COST_TARGET:.0f}x", "same bug fork / fresh",
                   "fork server start + preload (once)", "commit"], rows)


def reached_at(trace: list, tokens: int | None) -> float | None:
    """Seconds after which shrinkgpu's best program first had at most ``tokens`` tokens
    (its own trace: the start of the search and each accepted reduction), or None."""
    if tokens is None:
        return None
    for seconds, size in trace or ():
        if size <= tokens:
            return float(seconds)
    return None


def _reached(ours: dict | None, row: dict) -> str:
    """For a peer's row: when shrinkgpu got as small as the peer's final output, and how
    many times sooner than the peer's wall time that was."""
    if row.get("tool") == "shrinkgpu" or ours is None or row.get("tokens") is None or not ours.get("trace"):
        return "-"
    at = reached_at(ours.get("trace"), row["tokens"])
    if at is None:
        return "never"
    wall = row.get("wall")
    ratio = f" ({wall / at:.0f}x sooner)" if wall and at > 0 else ""
    return f"{at:.0f} s{ratio}"


def peers_table(rows_in: list[dict], cases: dict) -> str:
    """Every tool on each case, the same oracle, the same machine, one run."""
    rows = []
    ours = {r.get("case"): r for r in rows_in if r.get("tool") == "shrinkgpu"}
    for row in sorted(rows_in, key=lambda r: (r.get("case", ""), PEER_ORDER.get(r.get("tool"), 9))):
        f = cases.get(row.get("case"), {})
        if row.get("error") and row.get("tokens") is None:
            rows.append([row.get("case", ""), row.get("tool", ""), "-", "-", "-", "-", "-", "-", "-", "-", "-",
                         "error: " + _oneline(portable(row["error"]), 160)])
            continue
        calls = row.get("calls")
        calls_s = "-" if calls is None else str(calls) + (f" ({row['runs']})" if row.get("runs") is not None else "")
        tokens = row.get("tokens")
        ideal = f.get("ideal_tokens")
        rows.append([
            row.get("case", ""), row.get("tool", ""), str(row.get("jobs", "-")), _s(row.get("wall")), calls_s,
            _tokens(tokens, f.get("tokens")),
            "-" if ideal is None or tokens is None else f"{tokens / ideal:.1f}x",
            _repro(row), "yes" if row.get("capped") else "no", _waste(row), _reached(ours.get(row.get("case")), row),
            _oneline(_note(row), 160) or "-",
        ])
    return _table(["case", "tool", "jobs", "wall s", "calls", "tokens (of original)", "vs ideal", "reproduce",
                   "hit cap", "calls lost to Name/Unbound/ImportError", "shrinkgpu at this size after", "notes"], rows)


def scaling_table(rows_in: list[dict]) -> str:
    rows = []
    for r in sorted(rows_in, key=lambda r: r.get("statements", 0)):
        n = r.get("statements")
        rows.append([f"{n:,}" if n else "-", str(r.get("lines", "-")), str(r.get("tokens_original", "-")),
                     str(r.get("calls", "-")), str(r.get("runs", "-")), _s(r.get("wall")),
                     "-" if not r.get("calls") or not n else f"{r['calls'] / (n * math.log(n)):.3f}",
                     str(r.get("tokens", "-")), _repro(r), "yes" if r.get("capped") else "no",
                     f"`{r.get('commit', '?')}`"])
    return _table(["statements", "lines", "tokens", "calls (candidates)", "runs", "wall s", "calls / (n ln n)",
                   "output tokens", "reproduce", "hit cap", "commit"], rows)


def search_table(rows_in: list[dict], cases: dict) -> str:
    """probdd and ddmin on the same cases: what each tested, kept and took."""
    rows = []
    for r in rows_in:
        total = (cases.get(r["case"]) or {}).get("tokens")
        rows.append([r["case"], r.get("search", "-"), str(r.get("calls", "-")), str(r.get("runs", "-")),
                     _tokens(r.get("tokens"), total), _s(r.get("wall")) + (" (capped)" if r.get("capped") else ""),
                     _repro(r), f"`{r.get('commit', '?')}`"])
    return _table(["case", "search", "candidates", "runs", "tokens (of original)", "wall s", "reproduce", "commit"],
                  rows)


def runs_table(records: dict[str, dict]) -> str:
    """Which run each figure comes from: commit, date, machine, command."""
    seen: dict[str, dict] = {}
    used: dict[str, set] = {}
    for suite, rec in records.items():
        for commit, run in (rec.get("runs") or {}).items():
            seen.setdefault(commit, run)
            used.setdefault(commit, set()).add(suite)
    rows = []
    for commit, run in sorted(seen.items(), key=lambda kv: (kv[1].get("started") or kv[1].get("date") or "", kv[0])):
        m = run.get("machine") or {}
        model = f" ({m['cpu_model']})" if m.get("cpu_model") else ""
        machine = f"{m.get('cpus', '?')} cores{model}, torch {m.get('torch_version', '?')}" if m else "-"
        dirty = " (src/ had uncommitted changes)" if "uncommitted" in str(m.get("revision", "")) else ""
        rows.append([f"`{commit}`{dirty}", str(run.get("date", "-")), ", ".join(sorted(used[commit])), machine,
                     _oneline(portable(run.get("command") or "-"), 400)])
    return _table(["commit", "date", "used for", "machine", "command"], rows)


# -- the document -------------------------------------------------------------------------------
def _suite_order(suite: str) -> tuple:
    return (suite != "fixtures", suite)


def render(records: dict[str, dict], *, against: dict[str, dict] | None = None, title: str = "Results",
           intro: str = "") -> str:
    """The document for ``records`` (suite -> record); ``against``: baseline records whose
    figures are set beside a run's."""
    out = [f"# {title}", ""]
    if intro:
        out += [intro, ""]
    out += ["## Runs", "", runs_table(records), ""]
    for suite in sorted(records, key=_suite_order):
        rec = records[suite]
        if not rec.get("rows") and not rec.get("cases"):
            continue
        cases = rec.get("cases", {})
        held = sum(1 for c in cases.values() if c.get("held_out"))
        where = "tests/fixtures" if suite == "fixtures" else "evaluation/cases"
        label = (f"{len(cases)} case{'s' if len(cases) != 1 else ''} in {where}"
                 + (", held out from tuning" if held == len(cases) and held else ""))
        out += [f"## {'Fixtures' if suite == 'fixtures' else 'Suite `' + suite + '`'} ({label})", ""]
        if rec.get("note"):
            out += [rec["note"], ""]
        if rec.get("rows"):
            out += [suite_table(rec, (against or {}).get(suite) if against is not None else None), ""]
            ablated = ablation_table(rec["rows"])
            if ablated:
                out += ["The comparisons after the search (one change at a time), from shrinkgpu's JSON:", "",
                        ablated, ""]
        out += ["<details><summary>The originals</summary>", "", cases_table(rec), "", "</details>", ""]
    parts = [(suite, rec) for suite, rec in sorted(records.items(), key=lambda kv: _suite_order(kv[0]))]
    cost = [r for _, rec in parts for r in rec.get("cost") or ()]
    if cost:
        out += ["## Candidate cost: fork server against a fresh interpreter", "", cost_table(cost), ""]
    for suite, rec in parts:
        peers = rec.get("peers") or {}
        if peers.get("rows"):
            out += [f"## Peers: shrinkgpu against general-purpose reducers ({suite})", ""]
            tools = peers.get("tools") or {}
            if tools:
                out += ["; ".join(f"{name}: {t.get('requirement', name)} {t.get('version') or ''}, jobs {t.get('jobs')}"
                                  .replace("  ", " ") for name, t in tools.items()) + ".", ""]
            out += [peers_table(peers["rows"], rec.get("cases", {})), ""]
    scaling = [r for _, rec in parts for r in rec.get("scaling") or ()]
    if scaling:
        out += ["## Scaling: generated scripts with one buried failing call", "", scaling_table(scaling), ""]
    for _suite, rec in parts:
        if rec.get("search"):
            out += ["## Search strategies side by side (`--search`)", "",
                    search_table(rec["search"], rec.get("cases", {})), ""]
    return "\n".join(out).rstrip() + "\n"


def write(text: str, path: Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
