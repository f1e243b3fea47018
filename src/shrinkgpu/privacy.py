"""Nothing private in what goes to a maintainer (field guide, rule 8).

A report is pasted into public bug trackers.  What it must not carry: the home
directory and the user's name, the host's name, absolute paths outside the project
(a sandbox's, a virtual environment's), and the values of environment variables (an API
key a script read from ``os.environ`` ends up in error messages and argparse defaults).
``Redactor`` replaces each with a placeholder and keeps a list of what it replaced, for
the report's note; ``leaks`` finds such values that a reduced script contains and its
original did not.

Plain standard library.
"""

from __future__ import annotations

import getpass
import os
import re
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

# Values this short are words ("cpu", "1", "true"), not secrets; PATH-like lists and the
# variables every machine has say nothing private.
MIN_SECRET = 6
# How the probe ends a value it cut short (worker/probe/ops.py).
TRUNCATED = "..."
PUBLIC_VARIABLES = frozenset({
    "PATH", "LANG", "LC_ALL", "LC_CTYPE", "SHELL", "TERM", "PWD", "OLDPWD", "SHLVL", "_", "TZ", "COLUMNS", "LINES",
    "PYTHONHASHSEED", "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING",
    "AMD_SERIALIZE_KERNEL", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "PYTHONUNBUFFERED",
    "PYTHONDONTWRITEBYTECODE", "DEBIAN_FRONTEND", "PIP_DISABLE_PIP_VERSION_CHECK", "PIP_DEFAULT_TIMEOUT",
})
# A dotted version ("3.11.9" in PYENV_VERSION, "2.13.0+cpu") names software, not a person;
# replacing it turned the report's "Python 3.11.9" into "Python $PYENV_VERSION".  Four
# numbers are an address (MASTER_ADDR=10.0.0.5), which stays private.
VERSION = re.compile(r"v?\d+(\.\d+){1,2}([+-][A-Za-z0-9.]+|[a-z]+\d*)?")


def _private_value(name: str, value: str) -> bool:
    return name not in PUBLIC_VARIABLES and len(value) >= MIN_SECRET and not VERSION.fullmatch(value)


def _user() -> str | None:
    try:
        return getpass.getuser()
    except Exception:
        return None


@dataclass
class Redactor:
    """Replace private strings in text; ``replaced`` says which kinds were found."""

    project: Path | None = None  # shown relative: "."
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    extra_paths: Iterable[tuple[str, str]] = ()  # (path, placeholder), e.g. the sandbox
    replaced: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        rules: list[tuple[str, str, str]] = []  # (literal, placeholder, kind)
        for path, placeholder in self.extra_paths:
            rules.append((str(path), placeholder, "temporary run directories"))
        if self.project is not None:
            rules.append((str(Path(self.project).resolve()), ".", "the project's absolute path"))
        prefix = os.path.realpath(sys.prefix)
        if prefix not in ("/", "/usr"):
            rules.append((prefix, "<env>", "the Python environment's path"))
        home = os.path.realpath(os.path.expanduser("~"))
        if home not in ("/", ""):
            rules.append((home, "~", "the home directory"))
            if os.path.expanduser("~") != home:
                rules.append((os.path.expanduser("~"), "~", "the home directory"))
        for name, value in self.env.items():
            if not _private_value(name, value) or os.pathsep in value and os.sep in value:
                continue
            if value.startswith("/") and Path(value).is_absolute() and len(Path(value).parts) <= 2:
                continue  # "/usr", "/bin": public
            rules.append((value, f"${name}", "environment variable values"))
        user = _user()
        if user and len(user) >= 3 and user != "root":
            rules.append((user, "<user>", "the user name"))
        host = socket.gethostname()
        if host and len(host) >= 3 and host != "localhost":
            rules.append((host, "<host>", "the host name"))
        # Longest first: a path that contains the home directory is replaced as a whole.
        self._rules = sorted(rules, key=lambda r: -len(r[0]))

    def __call__(self, text: str) -> str:
        for literal, placeholder, kind in self._rules:
            if literal and literal in text:
                if kind in ("the user name", "the host name"):
                    pattern = re.compile(rf"(?<![\w.-]){re.escape(literal)}(?![\w-])")
                    text, n = pattern.subn(placeholder, text)
                    if n:
                        self.replaced.add(kind)
                    continue
                text = text.replace(literal, placeholder)
                self.replaced.add(kind)
        return self._truncated(text)

    def _truncated(self, text: str) -> str:
        """A value the run recorded cut short (``'/home/alice/da...'``: the probe keeps
        the first characters of a long argument) holds only the start of a private path,
        which the whole-literal replacement above cannot see.  The start is replaced too
        once it reaches past the path's parent directory, or reaches it where the parent is
        not a public one (``/home``, ``/Users``)."""
        if TRUNCATED not in text:
            return text
        for literal, placeholder, kind in self._rules:
            if kind in ("the user name", "the host name") or not literal.startswith("/"):
                continue
            parent = os.path.dirname(literal.rstrip("/"))
            public_parent = len(Path(parent).parts) <= 2
            shortest = len(parent) + (2 if public_parent else 0)
            pos = text.find(TRUNCATED)
            while pos != -1:
                for k in range(min(len(literal) - 1, pos), max(shortest, MIN_SECRET) - 1, -1):
                    if text.startswith(literal[:k], pos - k):
                        text = text[:pos - k] + placeholder + text[pos:]
                        pos += len(placeholder) - k
                        self.replaced.add(kind)
                        break
                pos = text.find(TRUNCATED, pos + len(TRUNCATED))
        return text

    def note(self) -> str | None:
        if not self.replaced:
            return None
        return "redacted from this report: " + ", ".join(sorted(self.replaced))


def leaks(result_text: str, original_text: str, env: Mapping[str, str] | None = None) -> list[str]:
    """Private values the reduced script contains and its original did not: what a pass
    baked in from the run (an environment variable's value, an expanded ``~``)."""
    env = dict(os.environ if env is None else env)
    found = []
    home = os.path.expanduser("~")
    if home not in ("/", "") and home in result_text and home not in original_text:
        found.append("the home directory (an expanded ~)")
    for name, value in env.items():
        if not _private_value(name, value):
            continue
        if value in result_text and value not in original_text:
            found.append(f"the value of ${name}")
    return found
