"""The ranks a script starts itself, fewest or none.

``mp.spawn(worker, args=(world, cfg), nprocs=world)`` (``torch.multiprocessing.spawn``,
``start_processes`` with any start method) starts the ranks in the script's own code, so
their number is an edit, not a launcher's option.  Level 0: the call becomes the failing
rank's function called directly, in this process (``worker(1, world, cfg)``, the rank the
first error came from): a bug in the model or the data needs no process group, and once
what the rank did to join one is gone the result runs as one plain ``python`` process.
Levels 1 and 2: ``nprocs`` becomes 1, then 2, and every argument that passed the same
expression (the world size the function reads) with it: a bug in a collective keeps the
fewest ranks that fail the same way.  The test decides; a world that no longer fails the
same way is not taken.  A ``Process(target=run, args=(0, 2)).start()`` of the user's own
(what the deletions leave of a ``Process`` launcher loop) becomes ``run(0, 2)`` at level 0
too.
"""

from __future__ import annotations

from typing import Sequence

import libcst as cst

from shrinkgpu.passes.base import EditPass, Unit
from shrinkgpu.syntax.code import code_of
from shrinkgpu.syntax.edits import Edit
from shrinkgpu.syntax.program import Candidate, statements_of

# The functions that start a script's ranks: ``mp.spawn``, ``torch.multiprocessing.spawn``,
# ``start_processes`` (by whatever name the module is imported as).
STARTERS = ("spawn", "start_processes")
FEWEST = (1, 2)  # the world sizes offered, one per level after the direct call


MODULES = ("torch.multiprocessing", "multiprocessing")


class _Imports(cst.CSTVisitor):
    """How a file names the starters: ``mp.spawn`` after ``import torch.multiprocessing as
    mp``, ``spawn`` after ``from torch.multiprocessing import spawn``,
    ``torch.multiprocessing.spawn`` after ``import torch``; and ``Process`` (of
    ``multiprocessing`` or ``torch.multiprocessing``) by the same rules."""

    def __init__(self):
        self.names: set[str] = set()  # the starters (spawn, start_processes)
        self.processes: set[str] = set()  # the Process class

    def _module(self, prefix: str, module: str) -> None:
        if module == "torch.multiprocessing":
            self.names.update(f"{prefix}.{s}" for s in STARTERS)
        self.processes.add(f"{prefix}.Process")

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            name = code_of(alias.name)
            local = code_of(alias.asname.name) if alias.asname else name
            if name in MODULES:
                self._module(local, name)
            elif name == "torch":
                self._module(f"{local}.multiprocessing", "torch.multiprocessing")

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        module = code_of(node.module) if node.module is not None else ""
        if isinstance(node.names, cst.ImportStar):
            if module in MODULES:
                self.processes.add("Process")
                if module == "torch.multiprocessing":
                    self.names.update(STARTERS)
            return
        for alias in node.names:
            name = code_of(alias.name)
            local = code_of(alias.asname.name) if alias.asname else name
            if module == "torch.multiprocessing" and name in STARTERS:
                self.names.add(local)
            elif module in MODULES and name == "Process":
                self.processes.add(local)
            elif module == "torch" and name == "multiprocessing":
                self._module(local, "torch.multiprocessing")


class _Starts(cst.CSTVisitor):
    """The starters' calls, and ``Process(target=f, args=a).start()`` calls."""

    def __init__(self, imports: _Imports):
        self.imports = imports
        self.calls: list[cst.Call] = []
        self.started: list[tuple[cst.Call, cst.Call]] = []  # (the ``.start()`` call, the ``Process(...)`` call)

    def visit_Call(self, node: cst.Call) -> None:
        if code_of(node.func) in self.imports.names and _function(node) is not None:
            self.calls.append(node)
        func = node.func
        if (isinstance(func, cst.Attribute) and func.attr.value == "start" and not node.args
                and isinstance(func.value, cst.Call) and code_of(func.value.func) in self.imports.processes):
            target = _argument(func.value, "target", 1)
            if target is not None and isinstance(target.value, cst.Name):
                self.started.append((node, func.value))


def _argument(call: cst.Call, keyword: str, position: int) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return positional[position] if position < len(positional) else None


def _function(call: cst.Call) -> cst.Name | None:
    arg = _argument(call, "fn", 0)
    return arg.value if arg is not None and isinstance(arg.value, cst.Name) else None


class FewestRanks(EditPass):
    name = "fewest-ranks"
    needs_rebased = True

    def units(self, cand: Candidate, level: int) -> Sequence[Unit] | None:
        if level > len(FEWEST):
            return None
        if self.waits(cand):
            return []
        program = cand.program
        rank = program.facts.rank if program.facts.rank is not None else 0
        out: list[Unit] = []
        starters: dict[str, _Imports] = {}
        for path, module in program.modules.items():
            imports = _Imports()
            module.visit(imports)
            starters[path] = imports
        simple = statements_of(cand, ["simple"])
        for i, s in enumerate(simple):
            imports = starters.get(s.file)
            if imports is None or not (imports.names or imports.processes):
                continue
            finder = _Starts(imports)
            s.node.visit(finder)
            units = [self._direct(call, rank) if level == 0 else self._fewer(call, FEWEST[level - 1])
                     for call in finder.calls]
            if level == 0:
                units += [self._process(start, process) for start, process in finder.started]
            for unit in units:
                if unit is not None:
                    out.append(tuple(Edit("expr", node=program.node_index(n), text=t) for n, t in unit))
            if level == 0:
                out += self._bound_process(cand, s, simple[i + 1:], imports)
        return out

    def _bound_process(self, cand: Candidate, s, later, imports: _Imports) -> list[Unit]:
        """``p = Process(target=run, args=(0, 2))`` and, after it in its block,
        ``p.start()``: ``p = run(0, 2)``, the start deleted (a ``p.join()`` left after it
        would fail: the test says whether one is)."""
        body = s.node.body[0] if isinstance(s.node, cst.SimpleStatementLine) and len(s.node.body) == 1 else None
        if not (isinstance(body, cst.Assign) and len(body.targets) == 1 and isinstance(body.targets[0].target, cst.Name)
                and isinstance(body.value, cst.Call) and code_of(body.value.func) in imports.processes):
            return []
        name = body.targets[0].target.value
        start = next((t for t in later if t.parent == s.parent and t.branch == s.branch
                      and code_of(t.node).strip() == f"{name}.start()"), None)
        direct = self._process(body.value, body.value)
        if start is None or direct is None:
            return []
        program = cand.program
        return [(Edit("expr", node=program.node_index(body.value), text=direct[0][1]), Edit("delete", start.id))]

    @staticmethod
    def _direct(call: cst.Call, rank: int) -> list[tuple[cst.CSTNode, str]] | None:
        """The call as the failing rank's function called in this process."""
        fn = _function(call)
        args = _argument(call, "args", 1)
        if fn is None:
            return None
        if args is None:
            rest = ""
        elif isinstance(args.value, cst.Tuple):
            rest = "".join(f", {code_of(e.value)}" if not isinstance(e, cst.StarredElement)
                           else f", *{code_of(e.value)}" for e in args.value.elements)
        else:
            rest = f", *{code_of(args.value)}"
        return [(call, f"{fn.value}({rank}{rest})")]

    @staticmethod
    def _process(start: cst.Call, process: cst.Call) -> list[tuple[cst.CSTNode, str]] | None:
        """``Process(target=f, args=(0, 2)).start()`` as ``f(0, 2)``, in this process."""
        target = _argument(process, "target", 1)
        args = _argument(process, "args", 2)
        if target is None or not isinstance(target.value, cst.Name):
            return None
        if args is None:
            rest = ""
        elif isinstance(args.value, cst.Tuple):
            rest = ", ".join(code_of(e.value) if not isinstance(e, cst.StarredElement) else f"*{code_of(e.value)}"
                             for e in args.value.elements)
        else:
            rest = f"*{code_of(args.value)}"
        return [(start, f"{target.value.value}({rest})")]

    @staticmethod
    def _fewer(call: cst.Call, n: int) -> list[tuple[cst.CSTNode, str]] | None:
        """``nprocs`` made ``n``, with every argument that passed the same expression."""
        nprocs = _argument(call, "nprocs", 2)
        if nprocs is None:
            return None  # (one process by default)
        value = nprocs.value
        if isinstance(value, cst.Integer) and int(value.value) <= n:
            return None
        edits: list[tuple[cst.CSTNode, str]] = [(value, str(n))]
        args = _argument(call, "args", 1)
        if args is not None and isinstance(args.value, cst.Tuple):
            same = code_of(value)
            edits += [(e.value, str(n)) for e in args.value.elements
                      if not isinstance(e, cst.StarredElement) and code_of(e.value) == same]
        return edits
