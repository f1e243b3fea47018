"""A loaded configuration becomes the values the program reads.

``cfg = yaml.safe_load(open("config.yaml"))`` (or ``json.load``, ``tomllib.load``) keeps
a file, the code that finds it and the reader; a maintainer's cut has
``cfg = {"model": {"in_channels": 3}, ...}``.  The probe records what each read
returned (``probe.watchers.watch_config_loads``), so the values are those of the run, overrides
applied later by the script included only where the script applies them.

Three levels:

0. the values read: ``cfg = yaml.safe_load(f)`` gone, each ``cfg["model"]["hidden"]``
   (also through ``mcfg = cfg["model"]``, and ``cfg.get("k", default)``) replaced by the
   value it read, a whole (sub-)dictionary where the program uses one whole;
1. the literal with only the keys the program can name (read as ``cfg["lr"]``,
   ``cfg.get("lr")``, passed on as ``**cfg`` to a parameter ``lr``, or compared in a
   string), in place of the read;
2. the whole literal in its place.

The file handling around the read (the ``with open(...) as f``, the path, the parser of
``--config`` when only it needed them) goes in the same unit: without it the unit would
grow the program and never be accepted.
"""

from __future__ import annotations

import ast
import re

import libcst as cst

from shrinkgpu.passes.base import EditPass, Unit, deletion_unit, names_read
from shrinkgpu.syntax.code import code_of
from shrinkgpu.syntax.edits import Edit
from shrinkgpu.syntax.program import Candidate

# Names a loader may be called by (the probe records json.load, yaml.safe_load, ...).
LOADER_NAMES = frozenset({"load", "loads", "safe_load", "full_load", "unsafe_load"})
_WORD = re.compile(r"[^\W\d]\w*")


class ConfigToLiteral(EditPass):
    """``cfg = yaml.safe_load(f)`` -> ``cfg = {"lr": 0.1, ...}`` with the values the run read."""

    name = "config-to-literal"
    needs_rebased = True  # the records' lines are those of the program that ran

    def units(self, cand: Candidate, level: int):
        if level > 2:
            return None
        if self.waits(cand):
            return []
        program = cand.program
        if not program.facts.loads:
            return []
        text = "\n".join(code_of(m) for m in program.modules.values())
        words = set(_WORD.findall(text))
        out: list[Unit] = []
        live = cand.live
        for record in program.facts.loads:
            sid = program.deps.statement_at(record.file, record.line)
            if sid is None or sid not in live:
                continue
            call = _loader_call(program.stmts[sid].node, record.function)
            if call is None:
                continue
            if level == 0:
                unit = _values_read(cand, sid, call, record.literal)
                if unit:
                    out.append(unit)
                continue
            literal = record.literal if level == 2 else _pruned(record.literal, words, text)
            if literal is None or (level == 2 and _pruned(record.literal, words, text) == literal):
                continue  # nothing pruned: level 1 already offered this literal
            out.append(_unit(cand, sid, call, literal))
        return out

    def unit_size(self, cand: Candidate, unit: Unit) -> int:
        return super().unit_size(cand, unit) + 1


def _values_read(cand: Candidate, sid: int, call: cst.Call, literal: str) -> Unit:
    """The unit of level 0: the read deleted and each read of its value replaced by the
    value; () when a read is a write (``cfg["lr"] = 1``) or the value has no name."""
    program = cand.program
    node = program.stmts[sid].node
    assign = node.body[0] if isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1 else None
    if not isinstance(assign, cst.Assign) or assign.value is not call or len(assign.targets) != 1:
        return ()
    target = assign.targets[0].target
    if not isinstance(target, cst.Name):
        return ()
    try:
        value = ast.parse(literal, mode="eval").body
    except SyntaxError:
        return ()
    edits: list[Edit] = []
    deleted = {sid}
    texts: list[str] = []
    if not _substitute(cand, sid, target.value, value, edits, deleted, texts, depth=0):
        return ()
    readers = frozenset(program.deps.enclosing(program.nodes[e.node]) for e in edits) - {None}
    dead = deletion_unit(cand, deleted, ignore=readers, new_text="\n".join(texts))
    if not dead:
        return ()
    return (*edits, *dead)


def _substitute(cand, sid, name, value: ast.expr, edits, deleted, texts, depth: int) -> bool:
    """Edits replacing every read of ``name`` (bound by ``sid`` to ``value``); names bound
    to a part of it (``mcfg = cfg["model"]``) are followed and their bindings deleted."""
    program = cand.program
    deps = program.deps
    live = cand.live
    reads = [n for n, _attr in deps.sole_readers.get(sid, ()) if n.value == name and deps.enclosing_live(n, live)]
    if not reads or depth > 4:
        return False
    for read in reads:
        where = deps.enclosing(read)
        parents = _parents(program.stmts[where].node)
        outer, part = _resolve(read, value, parents)
        if outer is None:
            return False  # written to, or a key the run did not read
        holder = parents.get(id(outer))
        assign = _lone_name_assignment(program.stmts[where].node)
        if assign is not None and assign.value is outer and isinstance(part, ast.Dict):
            # ``mcfg = cfg["model"]``: follow ``mcfg`` with the part, the line goes
            if not _substitute(cand, where, assign.targets[0].target.value, part, edits, deleted, texts, depth + 1):
                return False
            deleted.add(where)
            continue
        text = part.text if isinstance(part, _DefaultText) else ast.unparse(part)
        if (isinstance(holder, (cst.Attribute, cst.Subscript, cst.BinaryOperation, cst.UnaryOperation))
                and not isinstance(part, (ast.Constant, ast.Dict, ast.List, ast.Tuple))):
            text = f"({text})"
        edits.append(Edit("expr", node=program.node_index(outer), text=text))
        texts.append(text)
    return True


def _resolve(read: cst.Name, value: ast.expr, parents: dict) -> tuple[cst.CSTNode | None, ast.expr | None]:
    """The largest expression around ``read`` that indexes the recorded value with
    constant keys (``cfg["a"]["b"]``, ``cfg.get("a", d)``), and the part it reads;
    (None, None) when the read is a write or a key is missing."""
    node: cst.CSTNode = read
    part = value
    while True:
        holder = parents.get(id(node))
        if isinstance(holder, cst.Subscript) and holder.value is node and len(holder.slice) == 1:
            key = _constant(getattr(holder.slice[0].slice, "value", None))
            if key is _NO_KEY:
                break
            found = _item(part, key)
            if found is None:
                return None, None
            node, part = holder, found
            continue
        if isinstance(holder, cst.Attribute) and holder.value is node and holder.attr.value == "get":
            call = parents.get(id(holder))
            if isinstance(call, cst.Call) and call.func is holder and 1 <= len(call.args) <= 2:
                key = _constant(call.args[0].value)
                if key is _NO_KEY:
                    break
                found = _item(part, key)
                if found is None:
                    if len(call.args) == 1:
                        found = ast.Constant(None)
                    else:
                        # the default, as written: a read that found nothing
                        return call, _DefaultText(code_of(call.args[1].value))
                node, part = call, found
                continue
        break
    holder = parents.get(id(node))
    if isinstance(holder, cst.Del) or _is_store(node, parents):
        return None, None
    return node, part


class _DefaultText(ast.expr):
    """Text written as it is (a default argument kept from the source)."""

    def __init__(self, text: str):
        super().__init__()
        self.text = text


_NO_KEY = object()


def _constant(node):
    if isinstance(node, (cst.SimpleString, cst.Integer)):
        try:
            return ast.literal_eval(code_of(node))
        except (ValueError, SyntaxError):
            return _NO_KEY
    return _NO_KEY


def _item(part: ast.expr, key):
    if isinstance(part, ast.Dict):
        for k, v in zip(part.keys, part.values):
            if isinstance(k, ast.Constant) and k.value == key:
                return v
        return None
    if isinstance(part, (ast.List, ast.Tuple)) and isinstance(key, int):
        try:
            return part.elts[key]
        except IndexError:
            return None
    return None


def _is_store(node: cst.CSTNode, parents: dict) -> bool:
    """Whether ``node`` is (part of) something written: an assignment's target, the
    object of an in-place method (``cfg.update``, ``cfg.setdefault``, ``cfg.pop``)."""
    cur = node
    while cur is not None:
        holder = parents.get(id(cur))
        if isinstance(holder, cst.AssignTarget) or (isinstance(holder, cst.AugAssign) and holder.target is cur):
            return True
        if isinstance(holder, cst.Attribute) and holder.value is cur and holder.attr.value in (
            "update", "setdefault", "pop", "popitem", "clear", "append", "extend", "insert", "remove",
        ):
            return True
        if not isinstance(holder, (cst.Subscript, cst.SubscriptElement, cst.Index)):
            return False
        cur = holder
    return False


def _parents(root: cst.CSTNode) -> dict[int, cst.CSTNode]:
    out: dict[int, cst.CSTNode] = {}
    stack: list[cst.CSTNode] = []

    class Walk(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if stack:
                out[id(node)] = stack[-1]
            stack.append(node)
            return True

        def on_leave(self, original_node: cst.CSTNode) -> None:
            stack.pop()

    root.visit(Walk())
    return out


def _lone_name_assignment(node: cst.CSTNode) -> cst.Assign | None:
    if isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1:
        assign = node.body[0]
        if (isinstance(assign, cst.Assign) and len(assign.targets) == 1
                and isinstance(assign.targets[0].target, cst.Name)):
            return assign
    return None


def _loader_call(stmt: cst.CSTNode, function: str) -> cst.Call | None:
    """The call in ``stmt`` spelled like the loader the run saw: ``yaml.safe_load(f)``,
    ``safe_load(f)`` after ``from yaml import safe_load``, ``json.load(f)``."""
    module, _, attr = function.rpartition(".")
    found: list[cst.Call] = []

    class Find(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value == attr:
                # ``yaml.safe_load``, ``json.load``; a method of anything else is not a loader
                if code_of(func.value).split(".")[-1] in (module, module.split(".")[-1], "yaml", "json", "tomllib",
                                                          "tomli"):
                    found.append(node)
            elif isinstance(func, cst.Name) and func.value == attr and attr in LOADER_NAMES - {"load", "loads"}:
                found.append(node)

    stmt.visit(Find())
    return found[0] if len(found) == 1 else None


def _pruned(literal: str, words: set[str], text: str) -> str | None:
    """The literal with the dictionary keys the program cannot name left out, at every
    depth; None when it does not parse as Python (it always should)."""
    try:
        tree = ast.parse(literal, mode="eval")
    except SyntaxError:
        return None

    def named(key: ast.expr | None) -> bool:
        if not isinstance(key, ast.Constant) or not isinstance(key.value, str):
            return True  # numbers, ``**`` entries: keep
        value = key.value
        return value in words if value.isidentifier() else value in text

    class Prune(ast.NodeTransformer):
        def visit_Dict(self, node: ast.Dict) -> ast.Dict:
            self.generic_visit(node)
            kept = [(k, v) for k, v in zip(node.keys, node.values) if named(k)]
            node.keys = [k for k, _ in kept]
            node.values = [v for _, v in kept]
            return node

    return ast.unparse(Prune().visit(tree))


def _unit(cand: Candidate, sid: int, call: cst.Call, literal: str) -> Unit:
    program = cand.program
    stmts = program.stmts
    edits = [Edit("expr", node=program.node_index(call), text=literal)]
    parent = stmts[sid].parent
    call_code = code_of(call)
    gone = {sid}
    if (parent is not None and stmts[parent].kind == "with" and parent in cand.live
            and _only_read_by(stmts[parent].node, call)):
        edits.append(Edit("body", parent))
        # the header goes; the body stays, its reads counted through ``kept`` below
        gone = {parent} | {s.id for s in stmts if _encloses(program, parent, s.id)}
        kept = "\n".join(code_of(b) for b in stmts[parent].node.body.body)
    else:
        kept = code_of(stmts[sid].node)
    kept = kept.replace(call_code, literal, 1)
    if stmts[sid].kind != "simple" and gone == {sid}:
        return tuple(edits)  # a loop or branch header: its body is not gone
    dead = program.deps.dead_binders(cand, frozenset(gone), names_read(kept), pure_only=False)
    dead -= {s for s in dead if _encloses(program, s, sid) or s in gone}
    top = sorted(d for d in dead if stmts[d].parent not in dead)
    return (*edits, *(Edit("delete", d) for d in top))


def _only_read_by(with_node: cst.With, call: cst.Call) -> bool:
    """Whether every name the ``with`` binds is read only inside ``call``."""
    bound = []
    for item in with_node.items:
        if item.asname is None or not isinstance(item.asname.name, cst.Name):
            return False
        bound.append(item.asname.name.value)
    inside: set[int] = set()

    class Inside(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            inside.add(id(node))

    call.visit(Inside())
    stray = []

    class Reads(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            if node.value in bound and id(node) not in inside:
                stray.append(node)

    with_node.body.visit(Reads())
    return not stray


def _encloses(program, outer: int, inner: int) -> bool:
    cur: int | None = inner
    while cur is not None:
        if cur == outer:
            return True
        cur = program.stmts[cur].parent
    return False
