"""A loader's first batch replaced by the slices of the tensors it is built from.

After ``loop-to-first-iteration`` a training step reads ``x, y = next(iter(loader))``.
A maintainer's repro has no loader: ``x, y = ds.x[:16], ds.y[:16]``.  For a
``DataLoader`` that takes items in order (no shuffle or sampler) and collates them by
default, the first batch is ``default_collate([ds[i] for i in range(B)])``; when ``ds[i]`` is
``(self.x[i], self.y[i])`` -- a local ``Dataset`` whose ``__getitem__`` indexes its
fields -- or the dataset is a ``TensorDataset(a, b)``, that is ``(ds.x[:B], ds.y[:B])``:
the stack of rows ``0..B-1`` of a contiguous tensor has the dtype, shape and strides of
its first ``B`` rows.  Where it does not (a field that is a list of numbers, a row built
from a Python scalar) the candidate fails differently and the oracle rejects it; nothing
here has to prove more than the shape of the code.

Any other item (``row = self.rows[i]; return row["emb"], row["label"]``, an item
that calls a transform) is written part by part as ``default_collate`` would put it
together: ``torch.stack([ds.rows[i]["emb"] for i in range(B)])`` for tensors,
``torch.tensor([...])`` for numbers, the list itself for strings.  Which a part is,
the source rarely says; the guesses are offered one per level, likeliest first.

With a collate function ``f`` and a list as the dataset the first batch is
``f(items[:B])``, which inlining then opens up.

The loader's definition goes in the same unit when this was its only reader, so the
candidate is smaller than what it replaces.
"""

from __future__ import annotations

import libcst as cst

from shrinkgpu.passes.base import EditPass, Unit, dedupe, deletion_unit, lone_assignment
from shrinkgpu.syntax.code import code_of
from shrinkgpu.syntax.edits import Edit
from shrinkgpu.syntax.program import Candidate
from shrinkgpu.syntax.queries import Substitute, bound_sequence, instance_class, method_of, module_names

# DataLoader keywords that do not change which items form the first batch, or how they
# are put together: workers, pinning and prefetching move the same items around.
_HARMLESS = frozenset(
    {"num_workers", "pin_memory", "drop_last", "persistent_workers", "prefetch_factor", "timeout",
     "worker_init_fn", "generator", "multiprocessing_context", "pin_memory_device", "in_order"}
)


class _NextCalls(cst.CSTVisitor):
    """``next(iter(L))`` and ``next(enumerate(L))`` with ``L`` a plain name."""

    def __init__(self):
        self.found: list[tuple[cst.Call, cst.Name, bool]] = []

    def visit_Call(self, node: cst.Call) -> None:
        if not (isinstance(node.func, cst.Name) and node.func.value == "next" and len(node.args) == 1):
            return
        inner = node.args[0].value
        if node.args[0].keyword is not None or node.args[0].star or not isinstance(inner, cst.Call):
            return
        if not (isinstance(inner.func, cst.Name) and inner.func.value in ("iter", "enumerate")):
            return
        if len(inner.args) != 1 or inner.args[0].keyword is not None or inner.args[0].star:
            return
        loader = inner.args[0].value
        if isinstance(loader, cst.Name):
            self.found.append((node, loader, inner.func.value == "enumerate"))


def _loader_args(node: cst.CSTNode) -> tuple[str, cst.BaseExpression, str, str | None] | None:
    """(loader name, dataset expression, batch size text, collate function text or None)
    for ``L = DataLoader(ds, ...)`` whose first batch is its dataset's first items, in
    order."""
    assign = lone_assignment(node)
    if assign is None:
        return None
    target = assign.targets[0].target
    call = assign.value
    if not isinstance(target, cst.Name) or not isinstance(call, cst.Call):
        return None
    if not code_of(call.func).split(".")[-1] == "DataLoader":
        return None
    dataset: cst.BaseExpression | None = None
    batch = "1"
    collate = None
    positional = [a for a in call.args if a.keyword is None]
    if any(a.star for a in call.args) or len(positional) > 3:
        return None
    if positional:
        dataset = positional[0].value
    if len(positional) > 1:
        batch = code_of(positional[1].value)
    if len(positional) > 2 and code_of(positional[2].value) != "False":
        return None  # shuffle
    for arg in call.args:
        if arg.keyword is None:
            continue
        key = arg.keyword.value
        if key == "dataset":
            dataset = arg.value
        elif key == "batch_size":
            batch = code_of(arg.value)
        elif key == "shuffle":
            if code_of(arg.value) != "False":
                return None
        elif key == "collate_fn":
            collate = None if code_of(arg.value) == "None" else code_of(arg.value)
        elif key not in _HARMLESS:
            return None  # sampler, batch_sampler: another first batch
    if dataset is None or batch == "None":
        return None
    return target.value, dataset, batch, collate


class _SliceRows(cst.CSTTransformer):
    """``X[i]`` -> ``X[:B]`` for the item index ``i``; ``ok`` stays True only if every read
    of ``i`` was such an index."""

    def __init__(self, index: str, batch: str):
        self.index = index
        self.batch = cst.parse_expression(batch)
        self.ok = True
        self.sliced = 0

    def leave_Subscript(self, original_node: cst.Subscript, updated_node: cst.Subscript):
        if isinstance(original_node.value, cst.Subscript) and _indexes(original_node.value, self.index):
            self.ok = False  # ``x[i][0]``, ``rows[i]["x"]``: a part of a row, not rows
        if len(updated_node.slice) == 1:
            el = updated_node.slice[0].slice
            if isinstance(el, cst.Index) and isinstance(el.value, cst.Name) and el.value.value == self.index:
                self.sliced += 1
                return updated_node.with_changes(
                    slice=[cst.SubscriptElement(slice=cst.Slice(lower=None, upper=self.batch))]
                )
        return updated_node


def _indexes(node: cst.Subscript, index: str) -> bool:
    if len(node.slice) != 1:
        return False
    el = node.slice[0].slice
    return isinstance(el, cst.Index) and isinstance(el.value, cst.Name) and el.value.value == index


class _Reads(cst.CSTVisitor):
    def __init__(self, name: str):
        self.name = name
        self.count = 0

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.name:
            self.count += 1

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False  # ``x.i`` is not a read of ``i``


def _item_expression(fn: cst.FunctionDef) -> tuple[cst.BaseExpression, str, str] | None:
    """``__getitem__``'s body as one expression (its ``name = expr`` lines substituted
    into the returned value), with the names of ``self`` and of the index."""
    params = list(fn.params.posonly_params) + list(fn.params.params)
    if len(params) != 2 or fn.decorators or not isinstance(fn.body, cst.IndentedBlock):
        return None
    self_name, index = params[0].name.value, params[1].name.value
    values: dict[str, str] = {}
    body = list(fn.body.body)
    for k, stmt in enumerate(body):
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            return None
        small = stmt.body[0]
        if isinstance(small, cst.Expr) and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString)):
            continue  # docstring
        if k == len(body) - 1:
            if not isinstance(small, cst.Return) or small.value is None:
                return None
            return small.value.visit(Substitute(values)), self_name, index
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1
                and isinstance(small.targets[0].target, cst.Name)):
            return None
        name = small.targets[0].target.value
        if name in (self_name, index):
            return None
        value = small.value.visit(Substitute(values))
        atomic = isinstance(value, (cst.Name, cst.Attribute, cst.Subscript, cst.Call))
        values[name] = f"({code_of(value)})" if not atomic else code_of(value)
    return None


def _first_batch(cand: Candidate, dataset: cst.BaseExpression, batch: str) -> list[str] | None:
    """Sources for the first ``batch`` items of ``dataset``, likeliest first, or None."""
    program = cand.program
    deps = program.deps
    if isinstance(dataset, cst.Call) and code_of(dataset.func).split(".")[-1] == "TensorDataset":
        if not dataset.args or any(a.keyword is not None or a.star for a in dataset.args):
            return None
        parts = [f"{code_of(a.value)}[:{batch}]" for a in dataset.args]
        return ["(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"]
    if not isinstance(dataset, cst.Name):
        return None
    binders = deps.binders(dataset)
    if len(binders) != 1:
        return None
    (binder,) = binders
    node = program.stmts[binder].node
    if isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1 and isinstance(node.body[0], cst.Assign):
        value = node.body[0].value
        if isinstance(value, cst.Call) and code_of(value.func).split(".")[-1] == "TensorDataset":
            return _first_batch(cand, value, batch)
    cls_sid = instance_class(cand, binder)
    if cls_sid is None:
        return None
    method = method_of(cand, cls_sid, "__getitem__")
    if method is None:
        return None
    found = _item_expression(method[1])
    if found is None:
        return None
    expr, self_name, index = found
    slicer = _SliceRows(index, batch)
    sliced = expr.visit(slicer)
    reads = _Reads(index)
    sliced.visit(reads)
    if slicer.sliced and not reads.count and slicer.ok:
        return [code_of(sliced.visit(Substitute({self_name: dataset.value})))]
    # Not rows of fields (``self.rows[i]["x"]``, ``self.tf(self.paths[i])``): each part
    # of the item becomes the list of its values over the first items, collated.
    if index == dataset.value or "torch" not in module_names(program):
        return None
    return _collated(expr.visit(Substitute({self_name: dataset.value})), index, batch)


# How ``default_collate`` puts one part of the items together, by the part's type:
# tensors are stacked, ints become an int64 tensor, floats a float64 one, anything else
# (strings, paths) stays a list.  The source does not say which type a part has
# (``row["label"]``), so each is an alternative, and the oracle picks.
_COLLATE = {
    "tensor": "torch.stack({})",
    "int": "torch.tensor({})",
    "float": "torch.tensor({}, dtype=torch.float64)",
    "other": "{}",
}
# At most this many combinations per site, likeliest first.
_MAX_GUESSES = 8


def _likely_kinds(part: cst.BaseExpression) -> list[str]:
    """The collate kinds of one item part, likeliest first, from its shape in the source."""
    head = code_of(part.func) if isinstance(part, cst.Call) else ""
    if isinstance(part, cst.Integer) or head in ("int", "len") or head.endswith(".item"):
        first = "int"
    elif isinstance(part, cst.Float) or head == "float":
        first = "float"
    elif isinstance(part, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)) or head in ("str", "f"):
        first = "other"
    else:
        first = "tensor"
    return [first] + [k for k in _COLLATE if k != first]


def _collated(item: cst.BaseExpression, index: str, batch: str) -> list[str]:
    """``default_collate([item for index in range(batch)])`` written part by part, one
    text per guess of the parts' types, likeliest first."""
    import itertools

    if (isinstance(item, (cst.Tuple, cst.List)) and item.elements
            and all(isinstance(e, cst.Element) for e in item.elements)):
        parts, keys = [e.value for e in item.elements], None
    elif (
        isinstance(item, cst.Dict)
        and item.elements
        and all(isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString) for e in item.elements)
    ):
        parts, keys = [e.value for e in item.elements], [code_of(e.key) for e in item.elements]
    else:
        parts, keys = [item], None
    if len(parts) > 4:
        return []
    orders = [_likely_kinds(part) for part in parts]
    combos = sorted(itertools.product(*(range(len(o)) for o in orders)), key=lambda ranks: (sum(ranks), ranks))
    out = []
    for ranks in combos[:_MAX_GUESSES]:
        texts = [
            _COLLATE[order[r]].format(f"[{code_of(part)} for {index} in range({batch})]")
            for part, order, r in zip(parts, orders, ranks)
        ]
        if keys is not None:
            out.append("{" + ", ".join(f"{k}: {t}" for k, t in zip(keys, texts)) + "}")
        elif len(texts) == 1 and parts[0] is item:
            out.append(texts[0])
        else:
            out.append("(" + ", ".join(texts) + ("," if len(texts) == 1 else "") + ")")
    return out


class FirstBatch(EditPass):
    """Level ``k`` offers each site's ``k``-th guess (see ``_collated``): guesses for one
    site never meet in one candidate."""

    name = "first-batch"
    needs_rebased = True

    def units(self, cand: Candidate, level: int) -> list[Unit] | None:
        if self.waits(cand):
            # (A guess taken at an earlier level has edited the candidate: no more levels.)
            return [] if level == 0 else None
        sites = self._sites(cand)
        if level > 0 and all(len(guesses) <= level for guesses in sites):
            return None
        return dedupe([guesses[level] for guesses in sites if len(guesses) > level])

    def _sites(self, cand: Candidate) -> list[list[Unit]]:
        program = cand.program
        deps = program.deps
        out: list[list[Unit]] = []
        for s in cand.editable():
            if s.kind != "simple":
                continue
            finder = _NextCalls()
            s.node.visit(finder)
            for call, loader, enumerated in finder.found:
                binders = deps.binders(loader)
                if len(binders) != 1:
                    continue
                (lsid,) = binders
                if lsid not in cand.live:
                    continue
                args = _loader_args(program.stmts[lsid].node)
                if args is None or args[0] != loader.value:
                    continue
                _, dataset, batch, collate = args
                if collate is not None:
                    # The loader hands ``collate`` the list of the first items: a slice
                    # of a list dataset.  Not ``collate([ds[i] for i in range(B)])`` for
                    # other datasets: it is exact, but it pins the dataset class and its
                    # ``__getitem__`` in place, where inlining the loop's step and the
                    # constructor gets much further (measured on eval_label_offset).
                    if not bound_sequence(program, dataset):
                        continue
                    data = code_of(dataset)
                    if not isinstance(dataset, (cst.Name, cst.Attribute)):
                        data = f"({data})"
                    text = f"{collate}({data}[:{batch}])"
                    texts = [text]
                else:
                    texts = _first_batch(cand, dataset, batch)
                if not texts:
                    continue
                guesses = []
                for text in texts:
                    if enumerated:
                        text = f"(0, {text})"
                    unit = [Edit("expr", node=program.node_index(call), text=text)]
                    if deps.readers(lsid, loader.value) == {s.id}:
                        unit += deletion_unit(cand, [lsid], ignore=frozenset({s.id}), new_text=text)
                        if collate is None:  # ``collate(items[:B])`` still indexes the list
                            unit += _unused_item_methods(cand, dataset, {lsid})
                    guesses.append(tuple(unit))
                out.append(guesses)
        return out


def _unused_item_methods(cand: Candidate, dataset: cst.BaseExpression, users: set[int]) -> list[Edit]:
    """``__getitem__`` and ``__len__`` of the dataset's class, when the loader was the only
    thing that took the dataset as a whole: what remains reads its fields, which the
    methods do not change."""
    program = cand.program
    if not isinstance(dataset, cst.Name):
        return []
    binders = program.deps.binders(dataset)
    if len(binders) != 1:
        return []
    (binder,) = binders
    if program.deps.readers(binder, dataset.value) != users:
        return []
    cls_sid = instance_class(cand, binder)
    if cls_sid is None:
        return []
    edits = []
    for name in ("__getitem__", "__len__"):
        method = method_of(cand, cls_sid, name)
        if method is not None:
            edits.append(Edit("delete", method[0]))
    return edits
