"""Changes of the whole minimal case: a third-party operator replaced by torch's own,
and what only a GPU run calls for: cuDNN off, deterministic algorithms on, synchronous
launches, and the CPU.

An operator of an extension (``torch.ops.<namespace>.<name>``, namespace not torch's)
is called as ``torch.ops.aten.<name>`` instead: when torch has an operator of that name,
the same values through the reference tell the extension's kernel from the values; when
it has none, the run fails differently, which is said as it is.  A module the case
imports as an optional one (in a ``try`` that catches ``ImportError``: xformers, apex,
flash-attn and the like, with the program's own fallback) is disabled
(``sys.modules[name] = None`` first thing, so that its import raises ``ImportError``):
the fallback then runs instead of the extension.

On the CPU none of them means anything (cuDNN and the launch queue are the GPU's, and
the CPU's kernels are deterministic but for a few scatter reductions), so a case that
ran on the CPU gets none.  The CPU change hides the GPUs (``CUDA_VISIBLE_DEVICES=""``):
a script that picks its device by ``torch.cuda.is_available()`` then runs on the CPU,
and one that names ``cuda`` fails differently, which is said as it is.
"""

from __future__ import annotations

import ast
import re
from typing import Mapping

from shrinkgpu.ablation.changes import BACKEND, CASE, DEVICE, EXTENSION, SYNC, Change, diff_of

__all__ = ["extension_changes", "program_changes", "with_line_after_torch"]

# torch's own operator namespaces: everything else under torch.ops is an extension's
_TORCH_NAMESPACES = ("aten", "prims", "prim", "quantized", "_quantized", "higher_order", "inductor", "profiler")
_EXTENSION_OP = re.compile(r"\btorch\.ops\.(?!(?:%s)\.)([A-Za-z_]\w*)\.([A-Za-z_]\w*)" % "|".join(_TORCH_NAMESPACES))


_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


def _optional_imports(text: str) -> list[str]:
    """The top-level names of the modules ``text`` imports in a ``try`` that catches an
    import's failure (a bare ``except`` too), in order."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    found: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try):
            continue
        caught = set()
        for handler in node.handlers:
            kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
            caught |= {"Exception" if k is None else (k.id if isinstance(k, ast.Name) else getattr(k, "attr", ""))
                       for k in kinds}
        if not caught & _IMPORT_ERRORS:
            continue
        for stmt in node.body:
            names = ([a.name for a in stmt.names] if isinstance(stmt, ast.Import)
                     else [stmt.module] if isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level
                     else [])
            for name in names:
                top = name.split(".")[0]
                if top not in ("torch", "sys") and top not in found:
                    found.append(top)
    return found


def _with_lines_first(text: str, lines: list[str]) -> str:
    """``text`` with ``lines`` before its first statement that is not a docstring or a
    ``from __future__`` import."""
    tree = ast.parse(text)
    at = 0
    for i, stmt in enumerate(tree.body):
        docstring = i == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
            and isinstance(stmt.value.value, str)
        if docstring or isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
            at = stmt.end_lineno or stmt.lineno
            continue
        break
    head = text.splitlines(keepends=True)
    return "".join(head[:at]) + "".join(ln + "\n" for ln in lines) + "".join(head[at:])


def extension_changes(files: Mapping[str, str], main: str | None = None) -> list[Change]:
    """Each extension operator the case calls, replaced by torch's of the same name; each
    optional module ``main`` imports, disabled."""
    seen: dict[str, str] = {}
    for name, text in files.items():
        if name.endswith(".py"):
            for m in _EXTENSION_OP.finditer(text):
                seen.setdefault(m.group(0), f"torch.ops.aten.{m.group(2)}")
    changes = []
    for op, reference in seen.items():
        new = {name: text.replace(op, reference) if name.endswith(".py") else text for name, text in files.items()}
        changes.append(Change(f"{reference} for {op}", "the reference operator for the extension's: the same values "
                              "through torch's own kernel", new, EXTENSION, CASE, diff_of(files, new)))
    if main is not None and main in files:
        for module in _optional_imports(files[main]):
            new = {**files, main: _with_lines_first(files[main], ["import sys", f"sys.modules[{module!r}] = None"])}
            changes.append(Change(f"{module} disabled", "the optional module's import made to fail: the program's own "
                                  "fallback instead of the extension", new, EXTENSION, CASE, diff_of(files, new)))
    return changes


def with_line_after_torch(text: str, line: str) -> str | None:
    """``text`` with ``line`` right after its first top-level ``import torch`` (None when
    it has none, or does not parse)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    for stmt in tree.body:
        imports_torch = (isinstance(stmt, ast.Import) and any(a.name == "torch" and a.asname is None
                                                              for a in stmt.names))
        if imports_torch:
            lines = text.splitlines(keepends=True)
            end = stmt.end_lineno or stmt.lineno
            return "".join(lines[:end]) + line + "\n" + "".join(lines[end:])
    return None


def program_changes(files: Mapping[str, str], main: str, *, on_gpu: bool,
                    launch_env: Mapping[str, str]) -> list[Change]:
    """The program-wide changes for a case that ran on a GPU (none for one that did not)."""
    if not on_gpu or main not in files:
        return []
    changes: list[Change] = []
    for name, what, line, env in (
        ("cuDNN off", "cuDNN's kernels replaced by PyTorch's own", "torch.backends.cudnn.enabled = False", {}),
        ("deterministic algorithms", "the deterministic kernels (and an error where an operator has none)",
         "torch.use_deterministic_algorithms(True)", {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}),
    ):
        text = with_line_after_torch(files[main], line)
        if text is not None:
            new = {**files, main: text}
            changes.append(Change(name, what, new, BACKEND, CASE, diff_of(files, new), env))
    if launch_env.get("CUDA_LAUNCH_BLOCKING") != "1":
        changes.append(Change("synchronous launches", "each kernel waited for: the error raised at the launch that "
                              "failed", dict(files), SYNC, CASE, "CUDA_LAUNCH_BLOCKING=1",
                              {"CUDA_LAUNCH_BLOCKING": "1"}))
    changes.append(Change("on the CPU", "the GPUs hidden: a hint about the GPU kernel, not CUDA evidence", dict(files),
                          DEVICE, CASE, 'CUDA_VISIBLE_DEVICES=""', {"CUDA_VISIBLE_DEVICES": ""}))
    return changes
