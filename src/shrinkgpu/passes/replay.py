"""Start at the failing iteration from its saved state instead of running the ones before.

A job that fails at epoch 7 spends every candidate's run on epochs 0-6 until the
training loop is gone, and cutting the loop (passes/hot.py, passes/loops.py) loses what
those epochs did to the weights: when the bug needs trained weights (a NaN after 9,000
updates), every such cut is a different bug, and the loop stays.  One more run of the
original saved the state at the start of the failing iteration (``probe.state``: the
state_dict of each module, optimizer, scheduler and scaler, the values the loop rebinds,
its targets, the random generators); the reducer checked, in a fresh interpreter, that
starting there fails with the same bug (``Facts.state`` is set only then).  The unit
grows the program by the restore's tokens, which no pass of ``PASSES`` may do (the
search only tries smaller candidates); so it is not one of them: the reducer checks its
units in a fresh interpreter and starts the search from the first that fails the same
way.  The units:

- level 0: the loop becomes the restore and one pass through its body, and the loops that
  took the run's time elsewhere (training before an evaluation that fails) go;
- level 1: the restore and the one pass only.

The restore is statements like any other (``model.load_state_dict(state["model"])``,
``step = state["step"]``): the passes after this one delete those the bug does not need.
What stays holds the user's weights; the report says so, and that the extracted call is
what to attach to a public issue.
"""

from __future__ import annotations

import re

import libcst as cst

from shrinkgpu.passes.base import EditPass, Unit, deletion_unit
from shrinkgpu.syntax.code import code_of, module_name
from shrinkgpu.syntax.edits import Edit
from shrinkgpu.syntax.facts import StateRecord, loop_header
from shrinkgpu.syntax.program import Candidate
from shrinkgpu.syntax.queries import bound_sequence, encloses, failing_statements, nth_item, runs_once


def state_variable(text: str) -> str:
    """A name for the loaded state that the file does not use."""
    for name in ("state", "saved_state", "replay_state"):
        if not re.search(rf"\b{name}\b", text):
            return name
    n = 1
    while re.search(rf"\breplay_state_{n}\b", text):
        n += 1
    return f"replay_state_{n}"


RESTORE = {
    "load": "{expr}.load_state_dict({value})",
    "value": "{expr} = {value}",
    "copy": "{expr}.data.copy_({value})",
    "torch-generator": "{expr}.set_state({value})",
    "random-generator": "{expr}.setstate({value})",
    "numpy-generator": "{expr}.bit_generator.state = {value}",
}
RNG = {
    "torch": ("torch", "{m}.set_rng_state({value})"),
    "cuda": ("torch", "{m}.cuda.set_rng_state_all({value})"),
    "numpy": ("numpy", "{m}.random.set_state({value})"),
    "random": ("random", "{m}.setstate({value})"),
}


def files_text(record: StateRecord, file_text: str) -> str:
    """The statement that puts back the files the run wrote before the failing iteration
    (into the working directory, where the program wrote and reads them); "" when none."""
    return put_back_text(record.files_dir, file_text)


def put_back_text(files_dir: str, file_text: str) -> str:
    """The statement that copies ``files_dir`` (beside the file) into the working
    directory, where the run wrote those files and the program reads them; "" for none."""
    if not files_dir:
        return ""
    names = {m: module_name(file_text, m) for m in ("pathlib", "shutil")}
    lines = [f"import {m}" for m in names if names[m] is None]
    lines.append(f"{names['shutil'] or 'shutil'}.copytree({names['pathlib'] or 'pathlib'}.Path(__file__).with_name("
                 f"{files_dir!r}), '.', dirs_exist_ok=True)")
    return "".join(line + "\n" for line in lines)


def restore_text(record: StateRecord, file_text: str, files: bool = True) -> str:
    """The statements that load the state file and put every entry and generator back;
    ``files``: and the files the run wrote before (unless they are put back earlier)."""
    var = state_variable(file_text)
    needed = ["pathlib", "torch"] + sorted({RNG[r][0] for r in record.rng if r in RNG} - {"torch"})
    names = {m: module_name(file_text, m) for m in needed}
    lines = [f"import {m}" for m in needed if names[m] is None]
    names = {m: name or m for m, name in names.items()}
    if files and record.files_dir:
        lines += files_text(record, file_text).splitlines()
    lines.append(f"{var} = {names['torch']}.load({names['pathlib']}.Path(__file__).with_name({record.state_file!r}), "
                 "weights_only=False)")
    for expr, kind in record.entries:
        template = RESTORE.get(kind)
        if template is not None:
            lines.append(template.format(expr=expr, value=f"{var}[{expr!r}]"))
    for rng in record.rng:
        if rng in RNG:
            module, template = RNG[rng]
            lines.append(template.format(m=names[module], value=f"{var}[{'rng:' + rng!r}]"))
    return "".join(line + "\n" for line in lines)


# Calls whose result walks a container the same way each time it is made again.
_WALKS = {"enumerate", "zip", "sorted", "reversed", "range"}
_VIEWS = {"items", "values", "keys"}


def walks_again(node: cst.BaseExpression, program=None) -> bool:
    """Whether evaluating the loop's iterable again walks the same items from the start:
    a literal, a dict's ``.items()``/``.values()``/``.keys()``, ``range``, a name bound
    once to a literal, and ``enumerate``/``zip``/``sorted``/``reversed`` of those.  Never
    a loader or an iterator, whose items come once (or in a new order)."""
    if isinstance(node, (cst.List, cst.Tuple, cst.Set, cst.Dict, cst.ListComp, cst.DictComp)):
        return True
    if isinstance(node, cst.Name):
        return program is not None and bound_sequence(
            program, node, (cst.List, cst.ListComp, cst.Tuple, cst.Dict, cst.DictComp, cst.Set))
    if not isinstance(node, cst.Call):
        return False
    func = node.func
    if isinstance(func, cst.Attribute) and func.attr.value in _VIEWS and not node.args:
        base = func.value
        while isinstance(base, cst.Attribute):
            base = base.value
        return isinstance(base, cst.Name)
    if isinstance(func, cst.Name) and func.value in _WALKS:
        if func.value == "range":
            return True
        positional = [a.value for a in node.args if a.keyword is None and not a.star]
        return bool(positional) and not any(a.star for a in node.args) and all(
            walks_again(v, program) for v in positional)
    return False


def _target_names(target: cst.BaseExpression) -> set[str]:
    names: set[str] = set()

    class Names(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            names.add(node.value)

        def visit_Attribute(self, node: cst.Attribute) -> bool:
            return False  # ``self.x`` as a target is restored as an attribute

        def visit_Subscript(self, node: cst.Subscript) -> bool:
            return False

    target.visit(Names())
    return names


def rebind_text(loop: cst.For, record: StateRecord, program=None, file_text: str = "") -> str:
    """The statement that binds the loop's targets to the failing iteration's item when
    the state could not carry some of them (a function, a lambda, an object of no data:
    a registry of models or of benchmark cases), made again from the iterable when that
    walks the same items each time; "" otherwise.  The replay's check in a fresh
    interpreter says whether it was the same item."""
    saved = {expr for expr, _kind in record.entries}
    if not isinstance(loop, cst.For) or _target_names(loop.target) <= saved:
        return ""
    if not walks_again(loop.iter, program):
        return ""
    item, module = nth_item(loop.iter, record.iteration, program)
    imported = module_name(file_text, module) if module else None
    if imported is not None:
        # (an import inside the function would make the name local to all of it)
        item = item.replace(f"{module}.", f"{imported}.", 1)
    return (f"import {module}\n" if module and imported is None else "") + f"{code_of(loop.target).strip()} = {item}\n"


def replay_text(loop: cst.For, record: StateRecord, file_text: str, files: bool = True, program=None) -> str:
    """The restore, then one pass through the loop's body: the body alone when it can
    stand alone, else the loop over the one item its targets now hold (a ``continue``
    or ``break`` still means what it meant).  Targets the state could not carry are
    bound from the iterable (``rebind_text``)."""
    text = restore_text(record, file_text, files) + rebind_text(loop, record, program, file_text)
    if runs_once(loop):
        body = [code_of(stmt) for stmt in loop.body.body]
        return text + "".join(b if b.endswith("\n") else b + "\n" for b in body)
    target = code_of(loop.target).strip()
    one = loop.with_changes(iter=cst.parse_expression(f"[({target})]"), leading_lines=())
    return text + code_of(one)


def _function_of(program, sid: int) -> str:
    """The name of the function the statement is in ("<module>" at the top level)."""
    cur = program.stmts[sid].parent
    while cur is not None:
        node = program.stmts[cur].node
        if isinstance(node, cst.FunctionDef):
            return node.name.value
        cur = program.stmts[cur].parent
    return "<module>"


class ReplayFromState(EditPass):
    """``for epoch in range(10): ...`` -> ``state = torch.load(...)``, the restore, the
    body of the failing iteration."""

    name = "replay-from-state"
    needs_rebased = True

    def units(self, cand: Candidate, level: int):
        if level > 1:
            return None
        if self.waits(cand):
            return []
        program = cand.program
        record = program.facts.state
        if record is None:
            return []
        loop = self.loop(cand)
        if loop is None:
            return []
        file_text = program.texts.get(loop.file, "")
        unit: list[Edit] = [Edit("replace", loop.id, text=replay_text(loop.node, record, file_text, program=program))]
        if level == 0:
            hot = {(f, h) for f, h, _share in program.facts.hot_loops}
            # A hot loop the failure runs through (the model's ``for block in
            # self.blocks`` in the forward the failing step calls, the evaluation's loop
            # over batches that calls the decoder) is on the way to the bug, not before it.
            failing = failing_statements(program)
            others = {
                s.id for s in cand.editable()
                if s.kind in ("for", "while") and (s.file, loop_header(s.node)) in hot
                and not encloses(program, s.id, loop.id) and not encloses(program, loop.id, s.id)
                and not any(encloses(program, s.id, f) for f in failing)
            }
            if not others:
                return []  # level 1 offers the same unit
            gone = deletion_unit(cand, others, new_text=unit[0].text)
            if not gone:
                return []
            gone = [e for e in gone if not encloses(program, loop.id, e.stmt)]
            if record.files_dir:
                # What the deleted loops wrote (the checkpoint the training saved) is put
                # back where the first of them ran: the statements between them and the
                # failing loop read it (``model.load_state_dict(torch.load("best.pt"))``).
                # Of a frame the failure came through (the training loop in ``main``, or
                # at the top level): a loop in another function (a validation's decoder)
                # may never run once the training is gone.
                frames = {_function_of(program, f) for f in failing} | {"<module>"}
                loops = [e for e in gone if any(s == e.stmt or encloses(program, e.stmt, s) for s in others)]
                first = min(loops, key=lambda e: (_function_of(program, e.stmt) not in frames, e.stmt), default=None)
                if first is not None and program.stmts[first.stmt].file == loop.file:
                    unit[0] = Edit("replace", loop.id, text=replay_text(loop.node, record, file_text, files=False,
                                                                        program=program))
                    gone = [Edit("replace", e.stmt, text=files_text(record, file_text)) if e is first else e
                            for e in gone]
            unit += gone
        return [tuple(unit)]

    @staticmethod
    def loop(cand: Candidate):
        """The statement of the loop the state was saved in, while the candidate has it."""
        program, record = cand.program, cand.program.facts.state
        for s in cand.editable():
            if (
                s.kind == "for" and s.file == record.file and s.id not in program.protected
                and loop_header(s.node) == record.header and _function_of(program, s.id) == record.function
            ):
                return s
        return None

    def unit_size(self, cand: Candidate, unit: Unit) -> int:
        stmts = cand.program.stmts
        return sum(stmts[e.stmt].size for e in unit if e.stmt >= 0)


__all__ = ["ReplayFromState", "files_text", "put_back_text", "rebind_text", "replay_text", "restore_text",
           "state_variable", "walks_again"]
