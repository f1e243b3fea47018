"""Where the other versions come from: the package indexes the user's pip is configured
with, and what they offer.

``shrinkgpu versions`` must install what the user's ``pip install NAME==VERSION`` would
find, so the indexes are pip's own (``pip config list``: the files and the ``PIP_*``
variables), handed to uv as its options.  Listing a package's versions (for ``--range``
and the nightlies) reads the same indexes' simple pages (PEP 503 HTML, or PEP 691 JSON
where the server offers it), ``file://`` indexes and ``--find-links`` directories, and
keeps the versions that have a wheel this interpreter can install.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import os
import re
import subprocess
import sys
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from packaging.tags import sys_tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

PYPI = "https://pypi.org/simple"
# pip's precedence: a variable over the install command's section over the global one.
SCOPES = (":env:", "install", "global")
FETCH_TIMEOUT = 60.0
ANCHOR = re.compile(r"<a\s([^>]*)>([^<]*)</a>", re.I)
HREF = re.compile(r"""href\s*=\s*["']([^"']+)["']""", re.I)


class IndexUnreadable(Exception):
    """An index could not be read; the message says which and why."""


@dataclass(frozen=True)
class Indexes:
    """pip's indexes, in pip's terms."""

    index_url: str = PYPI
    extra: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    no_index: bool = False

    def uv_args(self) -> list[str]:
        """The same indexes as uv's options.  With more than one place to look, pip takes
        the best version any of them has; uv's default stops at the first index that has
        the name (a guard against dependency confusion), which could install another
        version than the user's pip would: ``unsafe-best-match`` is pip's rule."""
        args = ["--no-index"] if self.no_index else ["--index-url", self.index_url]
        for url in () if self.no_index else self.extra:
            args += ["--extra-index-url", url]
        for link in self.find_links:
            args += ["--find-links", link]
        places = (0 if self.no_index else 1 + len(self.extra)) + len(self.find_links)
        if places > 1:
            args += ["--index-strategy", "unsafe-best-match"]
        return args

    def describe(self) -> str:
        places = ([] if self.no_index else [self.index_url, *self.extra]) + [f"find-links {f}" for f in self.find_links]
        return ", ".join(places) or "none"

    def to_json(self) -> dict:
        return {"index_url": None if self.no_index else self.index_url, "extra_index_urls": list(self.extra),
                "find_links": list(self.find_links)}


def parse_pip_config(text: str) -> Indexes:
    """``pip config list``'s lines (``global.index-url='...'``) as indexes."""
    values: dict[tuple[str, str], str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if not sep or "." not in key:
            continue
        scope, _, name = key.rpartition(".")
        values[(scope, name)] = value.strip().strip("'\"")

    def pick(name: str) -> str | None:
        for scope in SCOPES:
            if (scope, name) in values:
                return values[(scope, name)]
        return None

    index = pick("index-url") or PYPI
    extra = tuple((pick("extra-index-url") or "").split())
    links = tuple((pick("find-links") or "").split())
    no_index = (pick("no-index") or "").lower() in ("1", "true", "yes", "on")
    return Indexes(index, extra, links, no_index)


def pip_indexes(python: str = sys.executable, env: dict | None = None) -> Indexes:
    """The indexes the user's pip uses: ``pip config list`` of ``python`` (its files and
    the ``PIP_*`` variables); where that interpreter has no pip, the variables alone."""
    env = dict(os.environ if env is None else env)
    try:
        done = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True, text=True, env=env,
                              timeout=60)
        if done.returncode == 0:
            return parse_pip_config(done.stdout)
    except (OSError, subprocess.TimeoutExpired):
        pass
    lines = [f":env:.{k[4:].lower().replace('_', '-')}='{v}'" for k, v in env.items() if k.startswith("PIP_")]
    return parse_pip_config("\n".join(lines))


@dataclass(frozen=True)
class Offer:
    """One version of a package an index offers, with a file this interpreter can
    install (a wheel whose tags it supports)."""

    version: Version
    filename: str

    @property
    def nightly_date(self) -> dt.date | None:
        """The date of a nightly build (``2.16.0.dev20260915``), None otherwise."""
        dev = self.version.dev
        if dev is None or dev < 20000101:
            return None
        try:
            return dt.datetime.strptime(str(dev)[:8], "%Y%m%d").date()
        except ValueError:
            return None


def _read(url: str) -> tuple[str, str]:
    """(body, content type) of ``url``; ``file://`` URLs read the directory's
    ``index.html`` or list it."""
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme in ("", "file"):
        path = Path(urllib.parse.unquote(parsed.path))
        if path.is_dir() and (path / "index.html").is_file():
            path = path / "index.html"
        if path.is_dir():
            links = "".join(f'<a href="{html.escape(p.name)}">{html.escape(p.name)}</a>'
                            for p in sorted(path.iterdir()))
            return links, "text/html"
        if not path.is_file():
            return "", "text/html"  # the index has no such project
        return path.read_text(encoding="utf-8", errors="replace"), "text/html"
    request = urllib.request.Request(url, headers={
        "Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1", "User-Agent": "shrinkgpu"})
    try:
        with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT) as response:
            return response.read().decode("utf-8", "replace"), response.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return "", "text/html"
        raise IndexUnreadable(f"{url}: HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise IndexUnreadable(f"{url}: {exc}") from None


def _files(body: str, content_type: str) -> list[str]:
    """The file names a simple page lists, yanked ones left out."""
    if "json" in content_type:
        data = json.loads(body)
        return [f["filename"] for f in data.get("files", ()) if not f.get("yanked")]
    names = []
    for attributes, text in ANCHOR.findall(body):
        if "data-yanked" in attributes:
            continue
        href = HREF.search(attributes)
        target = href.group(1) if href else text
        names.append(urllib.parse.unquote(target.split("#", 1)[0].rsplit("/", 1)[-1]) or text.strip())
    return names


def offer_of(filename: str, name: str, tags: frozenset) -> Offer | None:
    """The version ``filename`` offers of ``name`` when this interpreter can install it
    without building it (shrinkgpu never builds from source: see envs.NO_BUILD)."""
    if not filename.endswith(".whl"):
        return None  # a source archive: never built here
    try:
        dist, version, _build, file_tags = parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion):
        return None
    if dist != canonicalize_name(name) or not (file_tags & tags):
        return None
    return Offer(version, filename)


def offers(name: str, indexes: Indexes) -> list[Offer]:
    """Every installable version of ``name`` on the indexes, oldest first (one per
    version string: a local variant such as ``+cpu`` is its own)."""
    project = canonicalize_name(name)
    pages = [] if indexes.no_index else [f"{u.rstrip('/')}/{project}/" for u in (indexes.index_url, *indexes.extra)]
    pages += list(indexes.find_links)
    tags = frozenset(sys_tags())
    found: dict[str, Offer] = {}
    for page in pages:
        body, kind = _read(page)
        for filename in _files(body, kind):
            offer = offer_of(filename, project, tags)
            if offer is not None:
                found.setdefault(str(offer.version), offer)
    return sorted(found.values(), key=lambda o: o.version)


def releases_between(found: list[Offer], low: Version, high: Version) -> list[Version]:
    """The final releases from ``low`` to ``high`` (both included when offered), oldest
    first; local variants (``2.12.0+cpu``) count as their release."""
    public = {Version(o.version.public) for o in found
              if not o.version.is_prerelease and not o.version.is_devrelease}
    return sorted(v for v in public if low <= v <= high)


def nightlies_between(found: list[Offer], first: dt.date, last: dt.date, local: str | None) -> list[Offer]:
    """One nightly per date from ``first`` to ``last``, oldest first: of that date's
    builds, the user's variant (``local``: ``cpu``, ``cu128``) where there is one, else
    the index's default build, else any; the highest version among them."""
    by_date: dict[dt.date, list[Offer]] = {}
    for o in found:
        day = o.nightly_date
        if day is not None and first <= day <= last:
            by_date.setdefault(day, []).append(o)

    def rank(o: Offer) -> tuple:
        return (o.version.local == local, o.version.local is None, o.version)

    return [max(builds, key=rank) for _day, builds in sorted(by_date.items())]
