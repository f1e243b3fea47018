"""Configuration into constants: the parser becomes the namespace it produced, and
names bound once to a constant become that constant where they are read.

Research scripts spend a tenth of their lines on ``argparse``; a maintainer's cut has
none of it.  The values come from the run itself (the probe records what each
``parse_args`` returned), so command-line arguments the user passed are honoured.
"""

from __future__ import annotations

import libcst as cst

from shrinkgpu.passes.base import LevelZeroPass, Unit, deletion_unit, single_bindings
from shrinkgpu.passes.inline import match_arguments
from shrinkgpu.syntax.code import code_of
from shrinkgpu.syntax.edits import Edit
from shrinkgpu.syntax.program import Candidate
from shrinkgpu.syntax.queries import assigned_attributes, variable_names

_PARSE_METHODS = ("parse_args", "parse_known_args")


class _FindParse(cst.CSTVisitor):
    def __init__(self):
        self.call: cst.Call | None = None

    def visit_Call(self, node: cst.Call) -> bool:
        if self.call is None and isinstance(node.func, cst.Attribute) and node.func.attr.value in _PARSE_METHODS:
            self.call = node
        return self.call is None


class _AttributeNames(cst.CSTVisitor):
    """Names a program may read from a namespace: ``args.lr``, ``cfg["lr"]``,
    ``getattr(args, "lr")``, ``cfg.get("lr")``."""

    def __init__(self):
        self.names: set[str] = set()

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.names.add(node.attr.value)

    def visit_SubscriptElement(self, node: cst.SubscriptElement) -> None:
        self._string(getattr(node.slice, "value", None))

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        name = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)
        if name in ("getattr", "hasattr", "get", "setdefault", "pop") and node.args:
            for arg in node.args[:2]:
                self._string(arg.value)

    def _string(self, node) -> None:
        if isinstance(node, cst.SimpleString):
            value = node.evaluated_value
            if isinstance(value, str) and value.isidentifier():
                self.names.add(value)


def _binds_module(module: cst.Module, name: str) -> bool:
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Import):
                    for alias in small.names:
                        if alias.asname is None and code_of(alias.name) == name:
                            return True
    return False


class ArgparseToNamespace(LevelZeroPass):
    """``args = parser.parse_args()`` -> ``args = argparse.Namespace(lr=0.1, ...)`` with
    the values the run parsed, keeping only attributes the program reads."""

    name = "argparse-to-namespace"

    def edits(self, cand: Candidate) -> list[Unit]:
        program = cand.program
        if not program.facts.parses:
            return []
        read = set()
        for module in program.modules.values():
            finder = _AttributeNames()
            module.visit(finder)
            read |= finder.names
        live = cand.live
        out = []
        for record in program.facts.parses:
            sid = program.deps.statement_at(record.file, record.line)
            if sid is None or sid not in live or program.stmts[sid].kind != "simple":
                continue
            finder = _FindParse()
            program.stmts[sid].node.visit(finder)
            if finder.call is None:
                continue
            values = [(k, v) for k, v in record.values if k in read]
            if any(v is None for _, v in values):
                continue  # a value we cannot write as a literal
            owner = "argparse" if _binds_module(program.modules[record.file], "argparse") else '__import__("argparse")'
            namespace = f"{owner}.Namespace({', '.join(f'{k}={v}' for k, v in values)})"
            if _binds_module(program.modules[record.file], "os"):
                # a value read from the environment stays a read of it (worker: no private literal)
                namespace = namespace.replace('__import__("os").', "os.")
            if finder.call.func.attr.value == "parse_known_args":
                namespace = f"({namespace}, [])"
            replace = Edit("expr", node=program.node_index(finder.call), text=namespace)
            # The parser is dead once its result is a constant: it goes in the same unit,
            # or the unit would grow the program and never be accepted.
            dead = deletion_unit(
                cand, _parser_binders(cand, finder.call, sid), ignore=frozenset({sid}), new_text=namespace
            )
            out.append((replace, *dead))
        return out


def _parser_binders(cand: Candidate, call: cst.Call, sid: int) -> set[int]:
    """Statements that build the parser whose ``parse_args`` is ``call``: the binding of
    ``parser`` in ``parser.parse_args()``, or the function in ``build_parser().parse_args()``."""
    deps = cand.program.deps
    stmts = cand.program.stmts
    receiver = call.func.value  # type: ignore[union-attr]
    if isinstance(receiver, cst.Call):
        receiver = receiver.func
    if not isinstance(receiver, cst.Name):
        return set()
    ancestors = set()
    cur = stmts[sid].parent
    while cur is not None:
        ancestors.add(cur)
        cur = stmts[cur].parent
    return {b for b in deps.binders(receiver) if b not in ancestors and b != sid}


# Longer strings stay behind their name: ``len(AMINO)`` reads better than the alphabet.
MAX_STRING = 16


def _constant_text(node: cst.BaseExpression) -> str | None:
    """Source of an immutable literal (numbers, short strings, True/False/None, tuples)."""
    if isinstance(node, (cst.Integer, cst.Float, cst.Imaginary)):
        return code_of(node)
    if isinstance(node, cst.SimpleString):
        text = code_of(node)
        return text if len(text) <= MAX_STRING + 2 else None
    if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
        return node.value
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = _constant_text(node.expression)
        return f"-{inner}" if inner is not None and not inner.startswith("-") else None
    if isinstance(node, cst.Tuple):
        parts = [_constant_text(el.value) for el in node.elements]
        if all(p is not None for p in parts):
            inner = ", ".join(parts)  # type: ignore[arg-type]
            return f"({inner},)" if len(parts) == 1 else f"({inner})"
    return None


def _tuple_items(node: cst.BaseExpression) -> list[str] | None:
    if not isinstance(node, cst.Tuple):
        return None
    parts = [_constant_text(el.value) for el in node.elements]
    return parts if parts and all(p is not None for p in parts) else None  # type: ignore[return-value]


def _indexed(program, deps, name: cst.Name) -> tuple[cst.Subscript, int] | None:
    """(``name[k]``, k) when the read ``name`` is subscripted by an integer literal."""
    return _keyed(program, deps, name, integers=True)


def _registry(node: cst.BaseExpression) -> dict[object, str] | None:
    """``{key: text}`` for a dict literal of constant keys whose values are names,
    attribute chains or constants (``{"tcn": TCN, "adam": torch.optim.Adam}``)."""
    if not isinstance(node, cst.Dict) or not node.elements:
        return None
    out: dict[object, str] = {}
    for el in node.elements:
        if not isinstance(el, cst.DictElement) or not isinstance(el.key, (cst.SimpleString, cst.Integer)):
            return None
        value = el.value
        text = code_of(value) if _dotted(value) else _constant_text(value)
        if text is None:
            return None
        import ast

        out[ast.literal_eval(code_of(el.key))] = text
    return out


def _dotted(node: cst.BaseExpression) -> bool:
    """``TCN``, ``torch.nn.Conv1d``: a name or a chain of attributes on one."""
    while isinstance(node, cst.Attribute):
        node = node.value
    return isinstance(node, cst.Name)


def _keyed(program, deps, name: cst.Name, integers: bool = False) -> tuple[cst.Subscript, object] | None:
    """(``name[k]``, k) when the read ``name`` is subscripted by a constant: a string or
    an integer (``-1`` too), only an integer with ``integers``."""
    import ast

    sid = deps.enclosing(name)
    if sid is None:
        return None
    found: list[tuple[cst.Subscript, object]] = []

    class Find(cst.CSTVisitor):
        def visit_Subscript(self, node: cst.Subscript) -> None:
            if node.value is name and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
                key = node.slice[0].slice.value
                number = isinstance(key, cst.Integer) or (
                    isinstance(key, cst.UnaryOperation) and isinstance(key.operator, cst.Minus)
                    and isinstance(key.expression, cst.Integer)
                )
                if number or (isinstance(key, cst.SimpleString) and not integers):
                    found.append((node, ast.literal_eval(code_of(key))))

    program.stmts[sid].node.visit(Find())
    return found[0] if found else None


def _namespace_values(node: cst.BaseExpression) -> dict[str, str] | None:
    """``{k: literal}`` for ``argparse.Namespace(k=literal, ...)`` (any spelling of the owner)."""
    if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Attribute):
        return None
    if node.func.attr.value not in ("Namespace", "SimpleNamespace"):
        return None
    out = {}
    for arg in node.args:
        if arg.keyword is None:
            return None
        text = _constant_text(arg.value)
        if text is None:
            return None
        out[arg.keyword.value] = text
    return out


def _constructor_fields(cand: Candidate, node: cst.BaseExpression) -> dict[str, str] | None:
    """``{field: argument}`` for ``t = Trainer(model, opt)`` where ``Trainer.__init__``
    stores parameters as they are (``self.model = model``) and nothing else rebinds the
    field: ``t.model`` reads what was passed.  Only plain arguments (names, literals)."""
    if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Name):
        return None
    program = cand.program
    binders = program.deps.binders(node.func)
    if len(binders) != 1:
        return None
    cls_sid = next(iter(binders))
    if program.stmts[cls_sid].kind != "class":
        return None
    init = None
    stored: dict[str, int] = {}  # how often each field is assigned anywhere in the class
    for sid in range(cls_sid + 1, program.last[cls_sid] + 1):
        st = program.stmts[sid].node
        if isinstance(st, cst.FunctionDef) and st.name.value == "__init__" and program.stmts[sid].parent == cls_sid:
            init = st
        if isinstance(st, cst.SimpleStatementLine):
            for small in st.body:
                targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else (
                    [small.target] if isinstance(small, (cst.AugAssign, cst.AnnAssign)) else []
                )
                for t in targets:
                    if isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name):
                        stored[t.attr.value] = stored.get(t.attr.value, 0) + 1
    if init is None or init.decorators or not isinstance(init.body, cst.IndentedBlock):
        return None
    params = list(init.params.posonly_params) + list(init.params.params)
    if not params or init.params.star_kwarg is not None or not isinstance(init.params.star_arg, cst.MaybeSentinel):
        return None
    self_name = params[0].name.value
    args = match_arguments(params[1:], list(init.params.kwonly_params), node)
    if args is None:
        return None
    out: dict[str, str] = {}
    for st in init.body.body:
        if not isinstance(st, cst.SimpleStatementLine) or len(st.body) != 1 or not isinstance(st.body[0], cst.Assign):
            continue
        assign = st.body[0]
        if len(assign.targets) != 1 or not isinstance(assign.value, cst.Name):
            continue
        target = assign.targets[0].target
        if not (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name)
                and target.value.value == self_name):
            continue
        field, param = target.attr.value, assign.value.value
        text = args.get(param)
        if text is None or stored.get(field) != 1:
            continue
        try:
            plain = isinstance(cst.parse_expression(text), (cst.Name, cst.Integer, cst.Float, cst.SimpleString))
        except cst.ParserSyntaxError:
            plain = False
        if plain:
            out[field] = text
    return out or None


def _dataclass_defaults(cand: Candidate, node: cst.BaseExpression) -> dict[str, str] | None:
    """``{field: literal}`` for ``Config()`` where ``Config`` is a local ``@dataclass``
    whose fields have literal defaults, or a plain class that holds only class attributes
    (what a config class is, and what a ``@dataclass`` is once its decorator is gone): a
    config object that is only ever read."""
    if not isinstance(node, cst.Call) or node.args or not isinstance(node.func, cst.Name):
        return None
    program = cand.program
    binders = program.deps.binders(node.func)
    if len(binders) != 1:
        return None
    return _config_class(program, program.stmts[next(iter(binders))], instance=True)


def _config_class(program, stmt, *, instance: bool) -> dict[str, str] | None:
    """The literal attributes of a config class: a ``@dataclass`` (its fields' defaults,
    ``default_factory`` ones only for an instance), or a plain class with no base, no
    decorator and no method, whose attributes nothing writes (``Config.lr = ...``)."""
    cls = stmt.node
    if not isinstance(cls, cst.ClassDef) or not isinstance(cls.body, cst.IndentedBlock):
        return None
    if cls.name.value in program.deps.stored_attribute_bases.get(stmt.file, ()):
        return None
    if any(code_of(d.decorator) in ("dataclass", "dataclasses.dataclass") for d in cls.decorators):
        plain = False
    elif not cls.decorators and not cls.bases and not cls.keywords:
        plain = True
    else:
        return None
    out: dict[str, str] = {}
    bound: dict[str, int] = {}  # how often the class body binds each name, any way
    for body_stmt in cls.body.body:
        if not isinstance(body_stmt, cst.SimpleStatementLine):
            if plain:
                return None  # a method: the class is more than a config
            continue
        for small in body_stmt.body:
            for name in _bound_names(small):
                bound[name] = bound.get(name, 0) + 1
            if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.value is not None:
                target, value = small.target, small.value
            elif (plain and isinstance(small, cst.Assign) and len(small.targets) == 1
                    and isinstance(small.targets[0].target, cst.Name)):
                target, value = small.targets[0].target, small.value
            else:
                continue
            text = _constant_text(value)
            if text is None and instance and not plain:
                text = _default_factory(value)
            if text is not None:
                out[target.value] = text
    # ``n = 1`` then ``n = f()`` or ``n += 1``: the class ends with another value.
    out = {k: v for k, v in out.items() if bound.get(k) == 1}
    return out or None


def _bound_names(small: cst.BaseSmallStatement) -> list[str]:
    """Names a class-body line binds (``a = b = 1``, ``a: int``, ``a += 1``, ``del a``,
    ``import a``), so a name bound twice is known to be."""
    names: list[str] = []

    def targets(node) -> None:
        if isinstance(node, cst.Name):
            names.append(node.value)
        elif isinstance(node, (cst.Tuple, cst.List)):
            for el in node.elements:
                targets(el.value)
        elif isinstance(node, cst.StarredElement):
            targets(node.value)

    if isinstance(small, cst.Assign):
        for t in small.targets:
            targets(t.target)
    elif isinstance(small, (cst.AnnAssign, cst.AugAssign, cst.Del)):
        targets(small.target)
    elif isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar):
        for alias in small.names:
            names.append(code_of(alias.asname.name) if alias.asname else code_of(alias.name).split(".")[0])
    return names


def _default_factory(node: cst.BaseExpression) -> str | None:
    """``field(default_factory=lambda: [...])`` -> the literal the lambda returns: every
    instance gets a fresh one, as every read of the pasted literal does."""
    if not isinstance(node, cst.Call) or code_of(node.func) not in ("field", "dataclasses.field"):
        return None
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value == "default_factory" and isinstance(arg.value, cst.Lambda):
            body = arg.value.body
            if isinstance(body, (cst.List, cst.Dict, cst.Tuple)) and _literal_container(body):
                return code_of(body)
    return None


def _literal_container(node: cst.BaseExpression) -> bool:
    if isinstance(node, (cst.List, cst.Tuple, cst.Set)):
        return all(_constant_text(el.value) is not None or _literal_container(el.value) for el in node.elements)
    if isinstance(node, cst.Dict):
        return all(
            isinstance(el, cst.DictElement)
            and _constant_text(el.key) is not None and _constant_text(el.value) is not None
            for el in node.elements
        )
    return False


# Tensor factories whose sizes are their positional arguments (or one tuple of them).
_SIZED_FACTORIES = frozenset({"randn", "rand", "zeros", "ones", "empty"})


def _factory_shape(value: cst.BaseExpression) -> list[str | None] | None:
    """The sizes, as literal texts, of ``torch.randn(4, 32)``, ``torch.zeros((4, 32))``,
    ``torch.randint(0, 9, (4, 32))``, ``2.0 * torch.randn(4, 32)``; None otherwise."""
    if isinstance(value, cst.BinaryOperation):
        literal = (cst.Integer, cst.Float)
        if isinstance(value.left, literal):
            return _factory_shape(value.right)
        if isinstance(value.right, literal):
            return _factory_shape(value.left)
        return None
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)):
        return None
    if code_of(value.func.value) != "torch":
        return None
    name = value.func.attr.value
    positional = [a.value for a in value.args if a.keyword is None and not a.star]
    if any(a.star for a in value.args) or any(a.keyword is not None and a.keyword.value == "size" for a in value.args):
        return None
    if name in _SIZED_FACTORIES:
        sizes = positional
        if len(sizes) == 1 and isinstance(sizes[0], (cst.Tuple, cst.List)):
            sizes = [el.value for el in sizes[0].elements]
    elif name == "randint" and len(positional) in (2, 3) and isinstance(positional[-1], (cst.Tuple, cst.List)):
        sizes = [el.value for el in positional[-1].elements]
    else:
        return None
    if not any(isinstance(n, cst.Integer) for n in sizes):
        return None
    # ``torch.randn(len(NAMES), 32)``: only the literal sizes can be read off.
    return [code_of(n) if isinstance(n, cst.Integer) else None for n in sizes]


def _shape_read(program, deps, name: cst.Name, attribute, rank: int) -> tuple[cst.BaseExpression, int] | None:
    """(``x.shape[k]`` or ``x.size(k)``, k) around the read ``name``, k within ``rank``."""
    if attribute is None or attribute.attr.value not in ("shape", "size"):
        return None
    sid = deps.enclosing(name)
    found: list[tuple[cst.BaseExpression, int]] = []

    def index(node) -> int | None:
        text = code_of(node).replace(" ", "")
        if text.lstrip("-").isdigit() and -rank <= int(text) < rank:
            return int(text) % rank
        return None

    class Find(cst.CSTVisitor):
        def visit_Subscript(self, node: cst.Subscript) -> None:
            if node.value is attribute and attribute.attr.value == "shape" and len(node.slice) == 1:
                el = node.slice[0].slice
                k = index(el.value) if isinstance(el, cst.Index) else None
                if k is not None:
                    found.append((node, k))

        def visit_Call(self, node: cst.Call) -> None:
            if node.func is attribute and attribute.attr.value == "size" and len(node.args) == 1:
                k = index(node.args[0].value) if node.args[0].keyword is None else None
                if k is not None:
                    found.append((node, k))

    program.stmts[sid].node.visit(Find())
    return found[0] if found else None


class PropagateConstants(LevelZeroPass):
    """Replace reads of a name bound once to a constant (``BATCH = 16``), to another name
    (``loader = train_loader``) or to a namespace of constants (``args.lr``) by what it
    stands for; the binding goes in the same unit."""

    name = "propagate-constants"

    def edits(self, cand: Candidate) -> list[Unit]:
        program = cand.program
        deps = program.deps
        out = []
        for s, name, value, readers in single_bindings(cand):
            if any(deps.in_fstring(n) or deps.is_del_target(n) for n, _ in readers):
                continue  # ``f"{NAME}"`` would nest quotes (before 3.12); ``del NAME`` has no literal
            constant = _constant_text(value)
            if constant is None and isinstance(value, cst.Name) and value.value != name:
                constant = value.value  # a copy: ``loader = train_loader``, ``self = model``
            edits = []
            complete = True  # every read replaced: the binding can go too
            if constant is not None:
                items = _tuple_items(value)
                for n, _ in readers:
                    # ``GRID[0]`` of ``GRID = (16, 16, 4)`` -> ``16``, not ``(16, 16, 4)[0]``.
                    sub = _indexed(program, deps, n) if items is not None else None
                    if sub is not None and -len(items) <= sub[1] < len(items):
                        edits.append(Edit("expr", node=program.node_index(sub[0]), text=items[sub[1]]))
                    else:
                        edits.append(Edit("expr", node=program.node_index(n), text=constant))
            elif (registry := _registry(value)) is not None:
                # ``MODELS = {"tcn": TCN}``; ``MODELS["tcn"]`` -> ``TCN``: a registry read
                # with a key the program spells.
                if deps.mutated(s.file, name):
                    continue
                for n, _ in readers:
                    found = _keyed(program, deps, n)
                    if found is None or found[1] not in registry:
                        complete = False
                    else:
                        edits.append(Edit("expr", node=program.node_index(found[0]), text=registry[found[1]]))
            elif (shape := _factory_shape(value)) is not None:
                # ``p = torch.randn(4, 32)``; ``p.shape[1]`` -> ``32``: once nothing
                # else reads ``p``, its draw can go (a second unit keeps it, in case
                # the random stream mattered).
                for n, attribute in readers:
                    found = _shape_read(program, deps, n, attribute, len(shape))
                    if found is None or shape[found[1]] is None:
                        complete = False
                    else:
                        edits.append(Edit("expr", node=program.node_index(found[0]), text=shape[found[1]]))
                if edits and complete:
                    out.append(tuple(edits))
            else:
                values = _namespace_values(value) or _dataclass_defaults(cand, value)
                if values is not None and deps.mutated(s.file, name):
                    continue  # ``cfg.items.append(...)``: a field read later may differ
                if values is None:
                    # Fields assigned once, in __init__: method calls cannot change them.
                    values = _constructor_fields(cand, value)
                if values is None or name in deps.stored_attribute_bases.get(s.file, ()):
                    continue
                for _n, attribute in readers:
                    if attribute is None or attribute.attr.value not in values:
                        complete = False  # passed on whole, or a field we cannot write
                        continue
                    edits.append(Edit("expr", node=program.node_index(attribute), text=values[attribute.attr.value]))
            if edits:
                unit: tuple = tuple(edits)
                if complete:
                    readers_at = frozenset(deps.enclosing(n) for n, _ in readers)
                    new_text = " ".join(e.text for e in edits)
                    unit += deletion_unit(cand, [s.id], ignore=readers_at, new_text=new_text)
                out.append(unit)
        out += self._class_reads(cand)
        return out

    @staticmethod
    def _class_reads(cand: Candidate) -> list[Unit]:
        """``Config.lr`` of a config class used as a namespace (never instantiated, or
        not only) -> its literal; the class goes too once nothing else reads it."""
        program = cand.program
        deps = program.deps
        out: list[Unit] = []
        for s in cand.editable():
            if not isinstance(s.node, cst.ClassDef):
                continue
            values = _config_class(program, s, instance=False)
            if values is None:
                continue
            name = s.node.name.value
            readers = list({
                id(n): (n, a) for n, a in deps.sole_readers.get(s.id, ())
                if n.value == name and deps.enclosing_live(n, cand.live)
            }.values())
            if any(deps.in_fstring(n) for n, _ in readers):
                continue
            # The class itself handed on (``setattr(Config, ...)``, ``C = Config``, a base
            # of another class) may be changed out of sight; ``Config()`` is only read.
            if any(a is None and not _bare_instantiation(deps, n) for n, a in readers):
                continue
            if any(a is not None and deps.is_del_target(a) for _, a in readers):
                continue
            edits = [
                Edit("expr", node=program.node_index(a), text=values[a.attr.value])
                for _, a in readers if a is not None and a.attr.value in values
            ]
            if not edits:
                continue
            unit: tuple = tuple(edits)
            if len(edits) == len(readers):
                readers_at = frozenset(deps.enclosing(n) for n, _ in readers)
                unit += deletion_unit(cand, [s.id], ignore=readers_at, new_text=" ".join(e.text for e in edits))
            out.append(unit)
        return out


def _bare_instantiation(deps, name: cst.Name) -> bool:
    """``Config()``: the read is the callee of a call without arguments."""
    call = deps.call_of(name)
    return call is not None and not call.args


class ScalarizeAttributes(LevelZeroPass):
    """``m = nn.Module(); m.fc = nn.Linear(4, 2); m.fc(x)`` -> ``fc = nn.Linear(4, 2);
    fc(x)``: an object made bare (often what inlining a constructor leaves) that is only
    ever used through its attributes becomes plain variables."""

    name = "scalarize-attributes"
    needs_rebased = True

    def edits(self, cand: Candidate) -> list[Unit]:
        program = cand.program
        deps = program.deps
        out: list[Unit] = []
        taken = set(deps.binders_named)
        for module in program.modules.values():
            taken |= variable_names(module)
        for s, name, value, readers in single_bindings(cand):
            if not isinstance(value, cst.Call) or value.args:
                continue
            if any(a is None for _, a in readers):
                continue  # the object itself is used, not just its attributes
            if any(deps.in_fstring(n) for n, _ in readers):
                continue
            if assigned_attributes(program, name, readers) != {a.attr.value for _, a in readers}:
                # an attribute the program reads but never sets on the object (a class
                # attribute, one its __init__ sets): a plain variable would be unbound
                continue
            # ``ds.x`` -> ``x``, or ``ds_x`` where the program already has an ``x``.
            renamed: dict[str, str] = {}
            for attr in sorted({a.attr.value for _, a in readers}):
                for new in (attr, f"{name}_{attr}"):
                    if new not in taken and new not in renamed.values():
                        renamed[attr] = new
                        break
            if len(renamed) < len({a.attr.value for _, a in readers}):
                continue  # no free plain name
            edits = [Edit("expr", node=program.node_index(a), text=renamed[a.attr.value]) for _, a in readers]
            readers_at = frozenset(deps.enclosing(n) for n, _ in readers)
            out.append((*edits, *deletion_unit(cand, [s.id], ignore=readers_at)))
        return out
