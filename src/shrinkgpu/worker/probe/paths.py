"""Which files are the user's: paths under the run's copies of the user's directory."""

from __future__ import annotations

import os


def is_under(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r + os.sep) for r in roots)


def is_user_file(filename: str, roots: tuple[str, ...]) -> bool:
    # "<string>", "<frozen ...>": code without a file, never the user's
    return not filename.startswith("<") and is_under(os.path.abspath(filename), roots)


def of_users_class(value, roots: tuple[str, ...]) -> bool:
    """An instance of a class the user wrote (a trainer, a config holder, a ``Trainer``
    subclass): its attributes may hold the model, the optimizer, what a library set."""
    import sys

    module = sys.modules.get(type(value).__module__)
    path = getattr(module, "__file__", None)
    return bool(path) and is_user_file(path, roots) and hasattr(value, "__dict__")
