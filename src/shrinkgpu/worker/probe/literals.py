"""Source text for values the run saw, never baking a private value into a script."""

from __future__ import annotations

import os
from typing import Any

from shrinkgpu.worker.probe.paths import is_under


def config_literal(value: Any, roots: tuple[str, ...], depth: int = 0) -> str | None:
    """Source text for a loaded configuration (dicts, lists and scalars), strings from
    the environment or the home directory written as reads of them; None otherwise."""
    if depth > 16:
        return None
    if isinstance(value, dict):
        parts = []
        for k, v in value.items():
            key, item = config_literal(k, roots, depth + 1), config_literal(v, roots, depth + 1)
            if key is None or item is None or not isinstance(k, (str, int, float, bool)):
                return None
            parts.append(f"{key}: {item}")
        return "{" + ", ".join(parts) + "}"
    if isinstance(value, (list, tuple)):
        parts = [config_literal(v, roots, depth + 1) for v in value]
        if any(p is None for p in parts):
            return None
        if isinstance(value, tuple):
            return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"  # type: ignore[arg-type]
        return "[" + ", ".join(parts) + "]"  # type: ignore[arg-type]
    if value is None or isinstance(value, (bool, int, float, str)):
        return private_literal(value, roots)
    return None  # dates, custom tags: no plain literal


# Environment values shorter than this are words ("cpu", "1"), not secrets.
MIN_PRIVATE = 6


def private_literal(value: Any, roots: tuple[str, ...]) -> str | None:
    """Source text for a parsed value that never bakes a private value into a script: a
    string read from the environment stays a read of the environment, an expanded ``~``
    stays ``~``; a string that merely contains such a value has no literal (None).
    ``roots``: the run's own copies of the user's directory."""
    if isinstance(value, str):
        if roots and os.path.isabs(value) and is_under(os.path.normpath(value), roots):
            # A path into the run's own copy (``os.path.dirname(__file__)``): every run has
            # its own copy, so only the path from the working directory means the same file.
            try:
                return repr(os.path.relpath(value, os.getcwd()))
            except ValueError:
                return None
        home = os.path.expanduser("~")
        if home not in ("/", "") and (value == home or value.startswith(home + os.sep)):
            return f'__import__("os").path.expanduser({("~" + value[len(home):])!r})'
        for name, env_value in os.environ.items():
            if len(env_value) < MIN_PRIVATE or name in ("PWD", "OLDPWD", "_"):
                continue
            if value == env_value:
                return f'__import__("os").environ[{name!r}]'
        if any(len(v) >= MIN_PRIVATE and v in value for v in os.environ.values()):
            return None
    elif isinstance(value, (list, tuple)):
        if any(isinstance(v, str) and private_literal(v, roots) != literal(v) for v in value):
            return None
    return literal(value)


def literal(value: Any) -> str | None:
    """Source text that evaluates to ``value``, or None when there is none."""
    import ast
    import math

    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if value is None or isinstance(value, (bool, int, float, str)) or (
        isinstance(value, (list, tuple)) and len(value) <= 64
    ):
        text = repr(value)
        try:
            if ast.literal_eval(text) == value:
                return text
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
    return None
