"""What the user points shrinkgpu at, read the way Python would run it.

* Sources are read as Python reads them: a PEP 263 coding declaration (``# -*- coding:
  latin-1 -*-``) or a UTF-8 BOM decides the encoding, and a file is written back in the
  encoding it declares, so a candidate's strings are the script's strings.
* A notebook (``.ipynb``) is its code cells in order: IPython magics and shell escapes
  are not Python and are dropped, each with a note; ``%%time``-like cell magics keep
  their body.
* ``-m pkg.module`` names a module under the working directory, as ``python -m`` finds
  it (``pkg/module.py`` or ``pkg/module/__main__.py``), without importing anything.

Plain standard library: nothing of ours, no torch.
"""

from __future__ import annotations

import json
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "InputError",
    "Notebook",
    "encode_source",
    "module_file",
    "notebook_to_script",
    "read_source",
    "script_for_notebook",
    "source_encoding",
]


class InputError(Exception):
    """The input cannot be read as a program; the message says why, in one line."""


def read_source(path: Path) -> str:
    """The text of a Python source, decoded as Python decodes it."""
    try:
        with tokenize.open(path) as fh:
            return fh.read()
    except SyntaxError as exc:  # an unknown codec in the declaration, or undecodable bytes
        raise InputError(f"{path}: cannot be decoded as Python source: {exc.msg}") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not valid in its declared encoding ({exc.reason} at byte {exc.start})") from None


_COOKIE = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.ASCII)


def source_encoding(text: str) -> str:
    """The encoding a source's coding declaration names (UTF-8 without one)."""
    for line in text.splitlines()[:2]:
        m = _COOKIE.match(line)
        if m is not None:
            return m.group(1)
        if line.strip() and not line.lstrip().startswith("#"):
            break  # the declaration counts only before any code
    return "utf-8"


def encode_source(text: str) -> bytes:
    """``text`` as the bytes of a file that declares its encoding, so that Python reads
    back exactly ``text``; UTF-8 when the declared codec is unknown or cannot hold it."""
    try:
        return text.encode(source_encoding(text))
    except (LookupError, UnicodeEncodeError):
        return text.encode("utf-8")


# -- notebooks ------------------------------------------------------------------------------
# Cell magics whose body is Python that runs as it would without them.
_TRANSPARENT_CELL_MAGICS = {"time", "timeit", "capture", "prun", "debug"}


@dataclass(frozen=True)
class Notebook:
    text: str
    notes: tuple[str, ...] = field(default=())


def notebook_to_script(path: Path) -> Notebook:
    """The code cells of a Jupyter notebook as one script, in order."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: not a readable notebook ({exc})") from None
    cells = data.get("cells")
    if cells is None and isinstance(data.get("worksheets"), list):  # nbformat 3
        cells = [c for ws in data["worksheets"] for c in ws.get("cells", ())]
    if not isinstance(cells, list):
        raise InputError(f"{path}: not a Jupyter notebook (no cells)")
    out: list[str] = []
    magics = shell = dropped_cells = 0
    for number, cell in enumerate(cells, 1):
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", cell.get("input", ""))
        lines = "".join(source).splitlines() if isinstance(source, list) else str(source).splitlines()
        if lines and lines[0].startswith("%%"):
            name = lines[0][2:].split()[0] if lines[0][2:].split() else ""
            if name not in _TRANSPARENT_CELL_MAGICS:
                dropped_cells += 1
                continue
            lines = lines[1:]
            magics += 1
        body: list[str] = []
        for line in lines:
            stripped = line.lstrip()
            if stripped.startswith("%"):
                magics += 1
                continue
            if stripped.startswith("!") or re.match(r"^\w+\s*=\s*!", stripped):
                shell += 1
                continue
            if "get_ipython()" in stripped:
                magics += 1
                continue
            body.append(line)
        if any(line.strip() for line in body):
            out.append(f"# In[{number}]:\n" + "\n".join(body))
    notes = []
    if magics:
        notes.append(f"{magics} IPython magic line(s) of the notebook were dropped (not Python)")
    if shell:
        notes.append(f"{shell} shell escape(s) ('!...') of the notebook were dropped")
    if dropped_cells:
        notes.append(f"{dropped_cells} cell(s) run by a cell magic other than %%time were dropped")
    text = "\n\n".join(out) + "\n"
    try:
        compile(text, str(path), "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise InputError(f"{path}: its code cells are not valid Python once magics are dropped: {exc}") from None
    return Notebook(text, tuple(notes))


def script_for_notebook(path: Path) -> Path:
    """Where the script made of a notebook sits, for runs and for the name of the result:
    beside the notebook, under a name no file there has."""
    candidate = path.with_suffix(".py")
    if not candidate.exists():
        return candidate
    return path.with_name(f"{path.stem}_notebook.py")


# -- python -m ------------------------------------------------------------------------------
def module_file(name: str, cwd: Path) -> Path:
    """The file ``python -m NAME`` would run from ``cwd``, for a module of the user's own."""
    if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", name):
        raise InputError(f"-m {name!r}: not a module name")
    base = cwd.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__main__.py"):
        if candidate.is_file():
            return candidate
    raise InputError(
        f"-m {name}: no {base.relative_to(cwd)}.py or {base.relative_to(cwd)}/__main__.py under {cwd}; "
        "shrinkgpu reduces modules of your own project, run from the directory python -m would be run from"
    )

