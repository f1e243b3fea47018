"""``shrinkgpu versions CASE``: the minimal case across versions of one package.

The maintainer's next questions after "here is a small script that fails" are "since
which release?" and "does it still fail on the newest one?".  This runs the minimal case
(and its extracted call) in environments that differ from the user's in one package
version each (envs.py: overlays), and judges each run by the same-bug rule ``check``
uses (``check.judge_candidate`` and ``check.verdict``: the recorded signature, its
strictness, ``--keep-error``/``--family``, the original's rate).  ``--try`` names the
versions; ``--range`` bisects the releases (or nightlies) between two ends (bisect.py).

A version's answer is one of: the same bug, another error (its class and message),
passes, could not be installed (uv's reason).  The user's own version runs in the
user's own environment, never in a copy.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from shrinkgpu.check import CheckConfig, CheckError, Reference, judge_candidate, reference, verdict
from shrinkgpu.check import default_cache as check_cache
from shrinkgpu.families import Family
from shrinkgpu.layout import OutputLayout
from shrinkgpu.reducer import ReduceError
from shrinkgpu.report import versions_section, write_versions_section
from shrinkgpu.signature import Signature, Strictness
from shrinkgpu.verify import CaseError, clean_env, load_case
from shrinkgpu.versions import envs, index
from shrinkgpu.versions.bisect import Bisection, Side, bisect
from shrinkgpu.worker import ExecutorFactory, default_executor

# The other environment may import more slowly (a CUDA build of torch took 11 s to
# import where the CPU build took 3 s): a run's limit is never under this.
MIN_TIMEOUT = 120.0
NIGHTLY = "nightly:"


class VersionsError(Exception):
    """The question cannot be asked; ``exit_code`` as the CLI returns it (2: usage)."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code


class Verdict(str, enum.Enum):
    SAME = "same bug"
    OTHER = "another error"
    PASSES = "passes"
    NOT_INSTALLED = "could not be installed"

    __str__ = str.__str__
    __format__ = str.__format__


@dataclass(frozen=True)
class Outcome:
    verdict: Verdict
    detail: str  # the other error's class and message, uv's reason, the rates
    reproduced: int = 0
    runs: int = 0

    def to_json(self) -> dict:
        return {"verdict": self.verdict.value, "detail": self.detail, "reproduced": self.reproduced,
                "runs": self.runs}


@dataclass(frozen=True)
class Row:
    package: str
    version: str
    environment: envs.Environment | None  # None: could not be installed
    minimal: Outcome
    extracted: Outcome | None = None
    yours: bool = False

    @property
    def side(self) -> Side:
        if self.minimal.verdict is Verdict.NOT_INSTALLED:
            return Side.SKIP
        return Side.SAME if self.minimal.verdict is Verdict.SAME else Side.OTHER

    def label(self) -> str:
        return f"{self.package} {self.version}" + (" (yours)" if self.yours else "")

    def to_json(self) -> dict:
        env = self.environment
        return {"package": self.package, "version": self.version, "yours": self.yours,
                "minimal_case": self.minimal.to_json(),
                "extracted_call": self.extracted.to_json() if self.extracted else None,
                "environment": env.to_json() if env is not None else None}


@dataclass(frozen=True)
class VersionsConfig:
    case: Path | None = None  # a case file (x.min.json) or the result beside it
    script: Path | None = None  # or a script, with keep_error/family as for ``check``
    args: tuple[str, ...] = ()
    keep_error: str | None = None
    family: Family | None = None
    strictness: Strictness = Strictness.STRICT
    tries: tuple[str, ...] = ()  # "numpy==1.26.4"
    span: tuple[str, str] | None = None  # ("torch", "2.10.0..2.15.0" or "nightly:2026-09-01..2026-10-15")
    runs: int = 3
    timeout: float | None = None
    root: Path | None = None
    cwd: Path | None = None
    cache: envs.Cache = field(default_factory=envs.Cache)
    env: dict | None = None
    indexes: index.Indexes | None = None  # None: the user's pip's


@dataclass(frozen=True)
class Subject:
    """What runs in each environment, and what it is judged against."""

    minimal: CheckConfig
    ref: Reference
    extracted: CheckConfig | None = None
    ext_ref: Reference | None = None
    report: Path | None = None


@dataclass
class Answer:
    package: str
    rows: list[Row]
    sentence: str
    mode: str  # "try" or "range"
    span: tuple[str, str] | None = None
    boundary: tuple[str, str] | None = None
    report: Path | None = None
    indexes: index.Indexes | None = None
    trimmed: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        built = [r.environment.seconds for r in self.rows if r.environment and r.environment.site and
                 not r.environment.reused]
        return {"package": self.package, "mode": self.mode, "sentence": self.sentence,
                "span": list(self.span) if self.span else None,
                "boundary": {"older": self.boundary[0], "newer": self.boundary[1]} if self.boundary else None,
                "versions": [r.to_json() for r in self.rows],
                "environments_built": len(built), "build_seconds": round(sum(built), 2),
                "environments_reused": sum(1 for r in self.rows if r.environment and r.environment.reused),
                "report": str(self.report) if self.report else None,
                "indexes": self.indexes.to_json() if self.indexes else None,
                "cache_trimmed": self.trimmed}


# -- what runs, and against what ---------------------------------------------------------------
def case_subject(config: VersionsConfig, base_env: dict) -> Subject:
    """The minimal case and the extracted call of a case file, judged by its recorded
    signatures, strictness, rate and the dimensions the original varied."""
    try:
        case = load_case(config.case)
    except CaseError as exc:
        raise VersionsError(str(exc)) from None
    if case.get("nproc_per_node"):
        raise VersionsError("a case that runs as torchrun's ranks is not supported by `versions` yet")
    here = Path(case["_dir"])
    written = here / case["case"]
    script, root = (written / case["main"], written) if written.is_dir() else (written, written.parent)
    if not script.is_file():
        raise VersionsError(f"{script}: the minimal case is not there any more")
    family = case.get("family")
    strictness = Strictness(case.get("strictness") or "strict")
    limit = config.timeout or max(MIN_TIMEOUT, 2 * float(case.get("timeout_fresh") or 0))
    env = {**base_env, **{k: str(v) for k, v in (case.get("launch_env") or {}).items()}}
    common = dict(keep_error=case.get("keep_error"), family=_family(family), strictness=strictness,
                  runs=config.runs, timeout=limit, env=env)
    free = frozenset((str(p), int(d)) for p, d in case.get("varying") or ())
    rate = tuple(case.get("original_rate") or (1, 1))
    recorded = Signature.from_json(case.get("final_signature") or case["signature"])
    minimal = CheckConfig(original=script, candidate=script, args=tuple(case.get("args", ())), root=root, cwd=root,
                          **common)
    ref = Reference(recorded, free, (int(rate[0]), int(rate[1])), None, 0.0)
    extracted = ext_ref = None
    if case.get("extracted") and (here / case["extracted"]).is_file():
        path = here / case["extracted"]
        extracted = CheckConfig(original=path, candidate=path, root=path.parent, cwd=path.parent, **common)
        ext_ref = dataclasses.replace(ref, signature=Signature.from_json(case["signature"]))
    report = OutputLayout(written if not written.is_dir() else written.with_suffix(".py")).report
    return Subject(minimal, ref, extracted, ext_ref, report if report.is_file() else None)


def _family(name: str | None) -> Family | None:
    from shrinkgpu.families import family_by_name

    return family_by_name(name) if name else None


def script_subject(config: VersionsConfig, base_env: dict, executors: ExecutorFactory,
                   say: Callable[[str], None]) -> Subject:
    """A script, judged against its own first error in the user's environment (observed
    once, and kept in ``check``'s cache)."""
    if config.keep_error is None and config.family is None:
        raise VersionsError("with a script, say which error is the bug: --keep-error REGEX or --family NAME")
    check_config = CheckConfig(original=config.script, candidate=config.script, args=config.args,
                               keep_error=config.keep_error, family=config.family, strictness=config.strictness,
                               runs=config.runs, timeout=config.timeout, root=config.root, cwd=config.cwd,
                               env=base_env, cache=check_cache())
    try:
        ref, _cached = reference(check_config, executors, say)
    except CheckError as exc:
        raise VersionsError(f"{exc} (`versions` compares other versions with the bug of your environment)",
                            exc.exit_code) from None
    except ReduceError as exc:
        raise VersionsError(str(exc), exc.exit_code) from None
    limit = config.timeout or max(MIN_TIMEOUT, 10 * ref.wall)
    return Subject(dataclasses.replace(check_config, timeout=limit), ref)


# -- judging one version ----------------------------------------------------------------------
def outcome_of(config: CheckConfig, ref: Reference, executors: ExecutorFactory, say: Callable[[str], None]) -> Outcome:
    """``check``'s answer for one script in one environment, as a verdict."""
    try:
        runs = judge_candidate(config, ref, executors, say)
    except (CheckError, ReduceError) as exc:
        return Outcome(Verdict.OTHER, f"could not be run: {exc}")
    same, part, detail, sig = verdict(config, ref, runs)
    reproduced = sum(r.same for r in runs)
    if same:
        return Outcome(Verdict.SAME, detail, reproduced, len(runs))
    if part == "no error":
        return Outcome(Verdict.PASSES, f"ran to its end in {len(runs)} run(s)", reproduced, len(runs))
    if part == "timeout":
        return Outcome(Verdict.OTHER, f"timed out after {config.timeout:.0f} s", reproduced, len(runs))
    other = sig.headline if sig is not None else detail
    return Outcome(Verdict.OTHER, other if part != "rate" else detail, reproduced, len(runs))


def judge(subject: Subject, environment: envs.Environment, base_env: dict, executors: ExecutorFactory,
          say: Callable[[str], None]) -> tuple[Outcome, Outcome | None]:
    env = environment.env(base_env)
    minimal = outcome_of(dataclasses.replace(subject.minimal, env={**subject.minimal.env, **_overlay(env)}),
                         subject.ref, executors, say)
    extracted = None
    if subject.extracted is not None:
        extracted = outcome_of(dataclasses.replace(subject.extracted, env={**subject.extracted.env, **_overlay(env)}),
                               subject.ext_ref, executors, say)
    return minimal, extracted


def _overlay(env: dict) -> dict:
    return {"PYTHONPATH": env["PYTHONPATH"]} if "PYTHONPATH" in env else {}


@dataclass
class Trial:
    """Versions judged in one call: the environments built or reused, the rows."""

    config: VersionsConfig
    subject: Subject
    user: envs.Installed
    indexes: index.Indexes
    base_env: dict
    executors: ExecutorFactory
    say: Callable[[str], None]
    uv: str | None = None
    rows: dict[tuple[str, str], Row] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)

    def environment(self, name: str, version: str) -> tuple[envs.Environment | None, str, bool]:
        """(the environment, why not when None, whether it is the user's own)."""
        mine = self.user.versions.get(name)
        if mine is not None and _same_release(mine, version):
            return envs.Environment(None, None), "", True
        if self.uv is None:
            self.uv = envs.uv_binary()
            if self.uv is None:
                raise VersionsError("`versions` builds its environments with uv, which is not installed here: "
                                    "pip install uv", exit_code=1)
        reasons = []
        for request in requests_for(name, version, self.user):
            self.say(f"{name} {request.version}: an environment (built once, then kept in {self.config.cache.root})")
            try:
                built = envs.build(request, self.user, self.indexes, self.config.cache, self.uv)
            except envs.NotInstallable as exc:
                reasons.append(f"{request.pin}: {exc}")
                continue
            self.used.add(self.config.cache.key(request, self.user, self.indexes))
            return built, "", False
        return None, "; ".join(reasons), False

    def row(self, name: str, version: str) -> Row:
        key = (name, version)
        if key in self.rows:
            return self.rows[key]
        environment, why, yours = self.environment(name, version)
        if environment is None:
            row = Row(name, version, None, Outcome(Verdict.NOT_INSTALLED, why))
        else:
            self.say(f"{name} {version}: running the minimal case" +
                     (" and the extracted call" if self.subject.extracted else ""))
            minimal, extracted = judge(self.subject, environment, self.base_env, self.executors, self.say)
            shown = environment.request.version if environment.request else self.user.versions.get(name, version)
            row = Row(name, shown if not yours else self.user.versions.get(name, version), environment, minimal,
                      extracted, yours)
        self.rows[key] = row
        return row


def requests_for(name: str, version: str, user: envs.Installed) -> list[envs.Request]:
    """The pins to try for ``version``: the user's build variant first (torch's ``+cpu``,
    ``+cu128``, ``+rocm6.4``) where the user's has one and the version names none, then
    the index's default build."""
    local = _local(user.versions.get(name))
    if local and "+" not in version:
        return [envs.Request(name, f"{version}+{local}"), envs.Request(name, version)]
    return [envs.Request(name, version)]


def _local(version: str | None) -> str | None:
    try:
        return Version(version).local if version else None
    except InvalidVersion:
        return None


def _same_release(mine: str, asked: str) -> bool:
    """Whether ``asked`` names the user's installed version (``2.13.0`` names
    ``2.13.0+cpu``; ``2.13.0+cu128`` does not)."""
    try:
        a, b = Version(mine), Version(asked)
    except InvalidVersion:
        return mine == asked
    return a.public == b.public and (b.local is None or a.local == b.local)


# -- the sentence ------------------------------------------------------------------------------
def phrase(row: Row) -> str:
    v = row.minimal.verdict
    if v is Verdict.SAME:
        return "fails the same way"
    if v is Verdict.PASSES:
        return "passes"
    if v is Verdict.NOT_INSTALLED:
        return "could not be installed"
    return f"fails another way ({row.minimal.detail})"


def range_sentence(package: str, ordered: list[Row], found: Bisection) -> str:
    usable = [r for r in ordered if r.side is not Side.SKIP]
    if not usable:
        return f"no {package} release from {ordered[0].version} to {ordered[-1].version} could be installed" \
            if ordered else f"no {package} version was found in the range"
    if found.boundary is None:
        first, last = usable[0], usable[-1]
        if first.side is Side.SAME:
            return f"fails the same way on every {package} release tried, {first.version} to {last.version}"
        return (f"does not fail the same way on any {package} release tried, {first.version} to {last.version}: "
                f"{phrase(last)} on {last.version}")
    older, newer = ordered[found.boundary[0]], ordered[found.boundary[1]]
    between = [r.version for r in ordered[found.boundary[0] + 1:found.boundary[1]] if r.side is Side.SKIP]
    skipped = f" ({', '.join(between)} between could not be installed)" if between else ""
    if newer.side is Side.SAME:
        return f"fails the same way since {package} {newer.version}; {phrase(older)} on {older.version}{skipped}"
    return f"fails the same way up to {package} {older.version}; {phrase(newer)} on {newer.version}{skipped}"


def try_sentence(rows: list[Row]) -> str:
    parts = []
    for row in rows:
        parts.append(f"{phrase(row)} with {row.label()}")
    return "; ".join(parts)


# -- the command -------------------------------------------------------------------------------
def parse_try(text: str) -> tuple[str, str]:
    name, sep, version = text.partition("==")
    if not sep or not name.strip() or not version.strip() or any(c in version for c in "<>=!~,*"):
        raise VersionsError(f"--try {text!r}: name one version, as NAME==VERSION (numpy==1.26.4)")
    return canonicalize_name(name.strip()), version.strip()


def span_versions(trial: Trial, package: str, span: str) -> list[str]:
    """The versions a ``--range`` covers, oldest first: final releases between two
    releases, or one nightly per date between two dates (``nightly:FROM..TO``)."""
    low, sep, high = span.removeprefix(NIGHTLY).partition("..")
    if not sep:
        raise VersionsError(f"--range {package} {span!r}: give FROM..TO (2.10.0..2.15.0, or "
                            "nightly:2026-09-01..2026-10-15)")
    try:
        found = index.offers(package, trial.indexes)
    except index.IndexUnreadable as exc:
        raise VersionsError(f"could not list the versions of {package}: {exc}", exit_code=1) from None
    if span.startswith(NIGHTLY):
        try:
            first, last = dt.date.fromisoformat(low), dt.date.fromisoformat(high)
        except ValueError:
            raise VersionsError(f"--range {package} {span!r}: dates as YYYY-MM-DD") from None
        if not any(o.nightly_date for o in found):
            raise VersionsError(
                f"no index that pip is configured with serves {package} nightlies (looked at: "
                f"{trial.indexes.describe()}); add one that does to pip's configuration (PyTorch's: "
                "pip config set global.extra-index-url https://download.pytorch.org/whl/nightly/cpu) and ask again")
        picked = index.nightlies_between(found, first, last, _local(trial.user.versions.get(package)))
        return [str(o.version) for o in picked]
    try:
        lo, hi = Version(low), Version(high)
    except InvalidVersion:
        raise VersionsError(f"--range {package} {span!r}: {low!r} or {high!r} is not a version") from None
    return [str(v) for v in index.releases_between(found, lo, hi)]


def versions(config: VersionsConfig, *, executors: ExecutorFactory = default_executor,
             on_stage: Callable[[str], None] | None = None) -> Answer:
    """Judge the case in each version asked for.  ``VersionsError`` when it cannot."""
    say = on_stage or (lambda message: None)
    if not config.tries and config.span is None:
        raise VersionsError("say which versions: --try NAME==VERSION (repeatable) or --range NAME FROM..TO")
    if config.tries and config.span is not None:
        raise VersionsError("--try and --range ask different questions: give one of them")
    base_env = clean_env(dict(os.environ if config.env is None else config.env))
    subject = case_subject(config, base_env) if config.case is not None else \
        script_subject(config, base_env, executors, say)
    config.cache.sweep()
    trial = Trial(config, subject, envs.installed(), config.indexes or index.pip_indexes(env=base_env), base_env,
                  executors, say)
    if config.span is not None:
        answer = run_range(trial)
    else:
        answer = run_tries(trial)
    answer.indexes = trial.indexes
    answer.trimmed = config.cache.trim(trial.used)
    if subject.report is not None:
        write_versions_section(subject.report, answer.package, versions_section(answer.sentence, version_table(answer)))
        answer.report = subject.report
    return answer


def run_tries(trial: Trial) -> Answer:
    asked = [parse_try(t) for t in trial.config.tries]
    packages = sorted({name for name, _ in asked})
    rows = []
    for name in packages:
        mine = trial.user.versions.get(name)
        if mine is not None and not any(_same_release(mine, v) for n, v in asked if n == name):
            rows.append(trial.row(name, mine))  # the user's own, for contrast
    rows += [trial.row(name, version) for name, version in asked]
    return Answer(", ".join(packages), rows, try_sentence(rows), "try")


def run_range(trial: Trial) -> Answer:
    package, span = trial.config.span
    package = canonicalize_name(package)
    found = span_versions(trial, package, span)
    if not found:
        raise VersionsError(f"the indexes pip is configured with ({trial.indexes.describe()}) offer no {package} "
                            f"release in {span} with a wheel for this Python and platform")
    started = time.monotonic()
    result = bisect(len(found), lambda i: trial.row(package, found[i]).side)
    trial.say(f"bisected {len(found)} versions in {time.monotonic() - started:.0f} s")
    tried = sorted(result.judged)  # indices into ``found``, oldest first
    judged = [trial.rows[(package, found[i])] for i in tried]
    view = Bisection({tried.index(i): s for i, s in result.judged.items()},
                     (tried.index(result.boundary[0]), tried.index(result.boundary[1])) if result.boundary else None)
    sentence = range_sentence(package, judged, view)
    boundary = (found[result.boundary[0]], found[result.boundary[1]]) if result.boundary else None
    return Answer(package, judged, sentence, "range", (found[0], found[-1]), boundary)


def version_table(answer: Answer) -> list[list[str]]:
    """The report's rows: version, environment, the minimal case, the extracted call,
    what else differs."""
    out = [["version", "environment", "minimal case", "extracted call", "also changed"]]
    for row in answer.rows:
        env = row.environment
        if row.yours:
            where = "yours"
        elif env is None:
            where = "-"
        else:
            where = ("reused" if env.reused else f"built in {env.seconds:.0f} s") + \
                (f", {env.variant} build" if env.variant else "")
        also = also_changed(env.also if env else ())
        if env is not None and env.kept:
            also = (also + "; " if also else "") + "kept yours: " + ", ".join(env.kept)
        minimal = f"{row.minimal.verdict}" + (f": {row.minimal.detail}" if row.minimal.verdict is not Verdict.SAME
                                             else "")
        ext = "" if row.extracted is None else f"{row.extracted.verdict}" + (
            f": {row.extracted.detail}" if row.extracted.verdict is not Verdict.SAME else "")
        out.append([row.label(), where, _short(minimal), _short(ext), _short(also)])
    return out


def also_changed(changes: tuple[tuple[str, str | None, str], ...], named: int = 3) -> str:
    """What else differs, in a table cell: each package of the user's at another version,
    and the ones added, counted (a CUDA build of torch brings twenty libraries of its
    own: ``--json`` lists them)."""
    moved = [f"{n} {a} -> {b}" for n, a, b in changes if a is not None]
    added = [f"{n} {b}" for n, a, b in changes if a is None]
    if added:
        more = f" and {len(added) - named} more" if len(added) > named else ""
        moved.append(f"added {', '.join(added[:named])}{more}")
    return ", ".join(moved)


def _short(text: str, limit: int = 300) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."
