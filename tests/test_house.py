"""The house rules of src/ (issue 44): rooms of one purpose stay small, and a module uses
another's public names only."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "shrinkgpu"
MAX_MODULE_LINES = 900
MAX_FUNCTION_LINES = 120


def modules():
    for path in sorted(SRC.rglob("*.py")):
        yield path, path.read_text(encoding="utf-8")


def test_no_module_is_over_900_lines():
    long = {str(p.relative_to(SRC)): t.count("\n") for p, t in modules() if t.count("\n") > MAX_MODULE_LINES}
    assert not long, long


def test_no_function_is_over_120_lines():
    long = {}
    for path, text in modules():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(SRC)}:{node.name}"] = lines
    assert not long, long


def test_no_private_name_is_imported_from_another_module():
    private = []
    for path, text in modules():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("shrinkgpu"):
                private += [f"{path.relative_to(SRC)}: {node.module}.{a.name}" for a in node.names
                            if a.name.startswith("_") and not a.name.startswith("__")]
    assert not private, private


def test_the_reduction_reads_like_its_phase_table():
    """``Reduction.phases`` calls one function per phase and sets nothing on the
    reduction: no phase reaches into another's attributes."""
    tree = ast.parse((SRC / "reducer" / "session.py").read_text(encoding="utf-8"))
    reduction = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Reduction")
    phases = next(n for n in reduction.body if isinstance(n, ast.FunctionDef) and n.name == "phases")
    assigned = [t for node in ast.walk(phases) if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign))
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                if isinstance(t, ast.Attribute)]
    assert not assigned, [ast.unparse(t) for t in assigned]
    assert phases.end_lineno - phases.lineno < 40


def test_no_circle_among_the_worker_modules():
    # Every import counts, a function's own included: a lazy import is a circle put off,
    # not taken away (default_executor's ``from ranks import`` in executors.py was one).
    import networkx as nx

    graph = nx.DiGraph()
    root = SRC / "worker"
    for path in sorted(root.rglob("*.py")):
        name = "shrinkgpu." + ".".join(path.relative_to(SRC.parent).with_suffix("").parts).split(".", 1)[1]
        name = name.removesuffix(".__init__")
        graph.add_node(name)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = ([node.module] if isinstance(node, ast.ImportFrom) and node.module else
                       [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            for target in targets:
                if target.startswith("shrinkgpu.worker.") and not name.endswith(("worker", "probe")):
                    graph.add_edge(name, target)
    circles = [c for c in nx.simple_cycles(graph) if not any(n in ("shrinkgpu.worker", "shrinkgpu.worker.probe")
                                                             for n in c)]
    assert not circles, circles
