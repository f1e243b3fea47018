"""Before any work: how the user runs the script, what the program's text is, and which
output paths are refused (never the input, one of its modules or a file it reads)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from shrinkgpu.inputs import InputError, module_file, notebook_to_script, read_source, script_for_notebook
from shrinkgpu.layout import OutputLayout
from shrinkgpu.reducer.config import ReduceConfig, ReduceError
from shrinkgpu.signature import Signature
from shrinkgpu.worker import ScriptSpec


def spec_for(config: ReduceConfig) -> ScriptSpec:
    """How the user runs the script, and which directory every run gets a copy of.

    The copy is of the user's working directory when the script lies inside it (so
    ``cd repo && shrinkgpu reduce scripts/train.py`` finds ``data/`` as ``python`` does),
    unless that is the home directory or ``/``; else of the script's directory; or of
    ``--root``.  A notebook runs as the script of its code cells, under a name beside it
    that no file has; ``-m pkg.mod`` runs the module's file as ``python -m`` does."""
    cwd = (config.cwd or Path.cwd()).resolve()
    module = config.module
    if module is not None:
        try:
            script = module_file(module, cwd)
        except InputError as exc:
            raise ReduceError(str(exc), exit_code=2) from None
    else:
        script = Path(config.script)
        if not script.is_absolute():
            script = cwd / script
        if not script.exists():
            raise ReduceError(f"{config.script}: no such file", exit_code=2)
        if not script.is_file():
            raise ReduceError(f"{config.script}: not a file", exit_code=2)
    script = script.resolve()
    if script.suffix == ".ipynb":
        script = script_for_notebook(script)
    if config.root is not None:
        root = Path(config.root).resolve()
    elif module is not None or (_inside(script, cwd) and cwd not in (Path.home().resolve(), Path("/"))):
        root = cwd
    else:
        root = script.parent
    if not _inside(script, root):
        raise ReduceError(f"the script {script} is not inside --root {root}", exit_code=2)
    argv0 = config.argv0 if config.argv0 is not None else str(config.script)
    if module is None and Path(config.script).suffix == ".ipynb":
        argv0 = script.name
    return ScriptSpec(
        script=script, args=tuple(config.args), cwd=cwd, root=root, env=config.env, stdin=config.stdin,
        argv0=argv0, module=module, launch=config.launch,
    )


def _inside(path: Path, directory: Path) -> bool:
    try:
        path.relative_to(directory)
        return True
    except ValueError:
        return False


def main_source(config: ReduceConfig, spec: ScriptSpec) -> tuple[str, tuple[str, ...]]:
    """The main program's text as Python would run it, and notes on how it was read."""
    named = Path(config.script) if config.module is None else spec.script
    if not named.is_absolute():
        named = spec.cwd / named
    try:
        if named.suffix == ".ipynb":
            notebook = notebook_to_script(named.resolve())
            return notebook.text, (f"the notebook {named.name}: its code cells, in order", *notebook.notes)
        return read_source(spec.script), ()
    except InputError as exc:
        raise ReduceError(str(exc), exit_code=2) from None


def imported_files(spec: ScriptSpec, config: ReduceConfig) -> list[Path]:
    """Local files the script's import statements name, found without running it (the
    first run tells the rest): what an output must never overwrite, known before any work."""
    import ast

    try:
        text, _ = main_source(config, spec)
        tree = ast.parse(text)
    except (ReduceError, SyntaxError, ValueError):
        return []
    bases = {spec.script.parent, spec.cwd, spec.root_dir}
    found = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] if not node.level else []
        for name in names:
            parts = name.split(".")
            for base in bases:
                for depth in range(1, len(parts) + 1):
                    stem = base.joinpath(*parts[:depth])
                    found += [stem.with_suffix(".py"), stem / "__init__.py"]
    return [f for f in found if f.is_file()]


def check_output(layout: OutputLayout, spec: ScriptSpec, protected: Iterable[Path] = ()) -> None:
    """Refuse, before any work, an output that would overwrite the input, a file of the
    program or one the script reads, or that cannot be a file; ``ReduceError`` (exit 2)."""
    output = layout.output
    guarded = {spec.script.resolve(), *(Path(p).resolve() for p in protected)}
    for path in (output, layout.report, layout.directory):
        if path.resolve() in (spec.script.resolve(), *(g for g in guarded if g.suffix == ".ipynb")):
            raise ReduceError(f"refusing to write the output over the input {path}", exit_code=2)
        if path.resolve() in guarded:
            raise ReduceError(
                f"refusing to write {path}: it is one of the script's own files (the input, a module it "
                "imports or a file it reads); choose another -o",
                exit_code=2,
            )
    if output.is_dir():
        raise ReduceError(f"-o {output}: is a directory; give a file name such as {output / 'repro.min.py'}",
                          exit_code=2)
    for parent in output.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ReduceError(f"-o {output}: {parent} is a file, not a directory", exit_code=2)
            if not os.access(parent, os.W_OK):
                raise ReduceError(f"-o {output}: {parent} is not writable", exit_code=2)
            break


def missing_file_hint(sig: Signature, spec: ScriptSpec) -> str:
    """For a first error about a file that is not there: where runs happen and how to fix it."""
    if sig.type not in ("FileNotFoundError", "NotADirectoryError", "OSError", "IsADirectoryError") and (
        "No such file" not in sig.message
    ):
        return ""
    return (
        f"\nEvery run works in a copy of {spec.root_dir} with the working directory at the same place "
        f"in it ({spec.cwd_rel or '.'}). If the script reads files outside that directory, give --root "
        "a directory that holds them, or run shrinkgpu from the directory you run python from."
    )
