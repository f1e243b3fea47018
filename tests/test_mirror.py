"""Tests mirror src/: each module of ``shrinkgpu`` has a test module of its name in the
folder that mirrors its package (``shrinkgpu.worker.runner`` ->
``tests/worker/test_runner.py``; a package's own ``__init__``, ``shrinkgpu.cli`` ->
``tests/test_cli.py``), or a line below that says why not.  Feature tests (a behaviour
across several modules) are in tests/features/, whole runs in tests/e2e/."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "shrinkgpu"
TESTS = ROOT / "tests"

RE_EXPORTS = "package __init__: re-exports only"
# module -> why it has no test module of its name.  Kept short: a module with behaviour
# of its own gets tests instead.
ALLOWED = {
    "shrinkgpu": "package __init__: the version, and the reducer's entry points imported on first use",
    "shrinkgpu.__main__": "__main__: `python -m shrinkgpu` calls the CLI (tests/test_cli.py runs it that way)",
    "shrinkgpu.ablation": RE_EXPORTS,
    "shrinkgpu.core": RE_EXPORTS,
    "shrinkgpu.passes": "package __init__: the registry of passes, tested whole in tests/passes/test_registry.py",
    "shrinkgpu.reducer": RE_EXPORTS,
    "shrinkgpu.report": RE_EXPORTS,
    "shrinkgpu.syntax": RE_EXPORTS,
    "shrinkgpu.worker": RE_EXPORTS,
    "shrinkgpu.worker.probe": RE_EXPORTS,
    "shrinkgpu.versions": RE_EXPORTS,
}


def modules() -> dict[str, Path]:
    """Every module of src/shrinkgpu by its dotted name (a package by its own name)."""
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def mirror(name: str) -> Path:
    """``shrinkgpu.a.b`` -> ``tests/a/test_b.py``."""
    *package, module = name.split(".")[1:] or [""]
    return TESTS.joinpath(*package, f"test_{module}.py")


def test_every_module_has_its_test_module_or_a_reason():
    missing = [f"{name} (no {mirror(name).relative_to(ROOT)})" for name in modules()
               if name not in ALLOWED and not mirror(name).is_file()]
    assert not missing, "modules with neither a test module of their name nor a line in ALLOWED:\n" + "\n".join(missing)


def test_the_allow_list_names_no_module_that_is_gone_or_has_its_tests():
    known = modules()
    stale = [name for name in ALLOWED if name not in known or (name != "shrinkgpu" and mirror(name).is_file())]
    assert not stale, f"remove from ALLOWED (gone, or tested now): {stale}"


def test_a_package_said_to_re_export_only_defines_nothing():
    for name, why in ALLOWED.items():
        if why != RE_EXPORTS:
            continue
        tree = ast.parse(modules()[name].read_text(encoding="utf-8"))
        own = [node for node in tree.body
               if not isinstance(node, (ast.Import, ast.ImportFrom))
               and not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
               and not (isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["__all__"])]
        assert not own, f"{name} defines {[ast.unparse(node).splitlines()[0] for node in own]}: give it tests"


def test_the_mirror_of_a_module_and_of_a_package():
    assert mirror("shrinkgpu.worker.runner") == TESTS / "worker" / "test_runner.py"
    assert mirror("shrinkgpu.signature") == TESTS / "test_signature.py"
    assert mirror("shrinkgpu.cli") == TESTS / "test_cli.py"
    assert mirror("shrinkgpu.worker.probe.ops") == TESTS / "worker" / "probe" / "test_ops.py"
