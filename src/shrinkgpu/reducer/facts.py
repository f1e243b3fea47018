"""The program and its facts (a reduction's second phase): what a run of a program tells
the passes (``syntax.Facts``), decoded from its observation, and what the original's
first run showed that every later program carries (``RunFacts``: no later run records
it again).

``build_program`` is the phase: the script and the local modules its run imported, with
the facts of that run (the loops around the failure, the library cut, the data objects
saved, the hot loops, the sizes the failing frames read).  ``RunFacts.program`` is the
one place a run's facts are carried onto a program: the original's, each start point's,
each rebased candidate's.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from shrinkgpu.families import METADATA_FAMILIES
from shrinkgpu.inputs import InputError, read_source
from shrinkgpu.layout import OutputLayout, library_call_name
from shrinkgpu.reducer.context import Context
from shrinkgpu.reducer.setup import check_output
from shrinkgpu.signature import Target
from shrinkgpu.syntax import (
    CutRecord,
    Facts,
    LoadRecord,
    ParseRecord,
    Program,
    SavedObject,
    SizeRecord,
    StateRecord,
    count_tokens,
)
from shrinkgpu.syntax.code import calls_named, module_name
from shrinkgpu.syntax.facts import loaded_cost, loop_facts
from shrinkgpu.syntax.program import FILE_COST
from shrinkgpu.syntax.values import EXACT, LAYOUT, tensor_source, value_source
from shrinkgpu.worker import Observation, Sandbox, ScriptSpec

# The search starts with loops that took this share of an original's run: a share of
# the samples the first run took, which a busy machine, slowing the loop and the rest
# alike, does not move.  How long they stay worth cutting first is a count of rebases
# (reducer/search.py: ``Adapter.rebase``), not a run time.
HOT_SHARE = 0.25


@dataclass(frozen=True)
class RunFacts:
    """What the original's run showed that every later program carries: the loops around
    the failure (counted again while runs are short), the library cut, the loops where
    the time went, the data objects saved (saved again as programs shrink), the state at
    the failing step (once a start there is checked), and the sizes the failing frames
    read (evaluated by the first run only)."""

    loops: tuple = ()
    cut: CutRecord | None = None
    hot_loops: tuple[tuple[str, str, float], ...] = ()
    saved_objects: tuple[SavedObject, ...] = ()
    state: StateRecord | None = None
    sizes: tuple[SizeRecord, ...] = ()

    def program(self, files: Mapping[str, str], main: str, run: Observation | None, *,
                hot: bool = True) -> Program:
        """``files`` as a program: the facts of its own ``run`` (the failing stack,
        argparse and configuration values, seeding; None: none known) with these;
        ``hot``: whether its loops are still worth cutting first."""
        facts = dataclasses.replace(facts_of(run), loops=self.loops, cut=self.cut,
                                    hot_loops=self.hot_loops if hot else (), saved_objects=self.saved_objects,
                                    state=self.state, sizes=self.sizes)
        return Program(dict(files), main, facts=facts)


@dataclass(frozen=True)
class Input:
    """The program the reduction starts with, what its first run showed, and the files
    that run saved beside it (the library's call, the data objects), by the name the
    program loads them by."""

    program: Program
    facts: RunFacts
    data_files: dict[str, Path]

    @property
    def files(self) -> dict[str, str]:
        return dict(self.program.texts)

    @property
    def main(self) -> str:
        return self.program.main


def build_program(ctx: Context, first: Observation, target: Target) -> Input:
    """The program (the script and the local modules its run imported) with the facts of
    its first run; outputs refused that would overwrite a file the run read."""
    spec = ctx.spec
    files = local_files(first, spec, ctx.main_text)
    # Now that the run showed which files are the program's and which it reads, none of
    # them may be the output.
    check_output(ctx.layout, spec, [spec.root_dir / rel for rel in (*files, *first.reads)])
    cut, data_files = library_cut(first, spec, ctx.sandbox, ctx.scratch.call, files)
    objects, object_files = saved_objects(first, spec, ctx.sandbox, ctx.layout)
    # Only the first run evaluates the failing frames' sizes; every later program
    # carries them (by text: the expressions stay while the program shrinks).  A tensor
    # drawn afresh keeps its dtype, shape, strides and device, not its values: offered
    # only for errors those alone raise.
    metadata = target.signature.family in METADATA_FAMILIES
    facts = RunFacts(
        loops=loop_facts(files, first.loops),
        cut=cut,
        hot_loops=hot_loops(files, first.loop_time),
        saved_objects=objects,
        sizes=tuple(s for s in sizes_of(first) if s.kind != "tensor" or metadata),
    )
    return Input(facts.program(files, spec.script_rel, first), facts, {**data_files, **object_files})


def hot_loops(files: Mapping[str, str], loop_time) -> tuple[tuple[str, str, float], ...]:
    """(file, header text, share) of the loops that took at least HOT_SHARE of the run."""
    out = []
    for file, line, share in loop_time:
        lines = files.get(file, "").splitlines()
        if share >= HOT_SHARE and 1 <= line <= len(lines):
            out.append((file, lines[line - 1].strip(), share))
    return tuple(out)


def local_files(obs: Observation, spec: ScriptSpec, main_text: str | None = None) -> dict[str, str]:
    """The program: the script and the local Python files its run imported, read as
    Python reads them (their coding declarations)."""
    files = {spec.script_rel: main_text if main_text is not None else read_source(spec.script)}
    modules = obs.modules or imported_beside(files[spec.script_rel], spec)
    for _name, _file, local in modules:
        if local is None or not local.endswith(".py") or local in files:
            continue
        original = spec.root_dir / local
        if original.is_file():
            try:
                files[local] = read_source(original)
            except InputError:
                continue
    return files


def imported_beside(text: str, spec: ScriptSpec) -> tuple[tuple[str, None, str], ...]:
    """The modules beside the main script it imports at its top level, read from its text:
    what a run that could not report its modules (a rank killed before its probe wrote)
    imported of the user's own.  Modules of other directories are only found by a run."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return ()
    here = Path(spec.script_rel).parent
    out = []
    for node in tree.body:
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
        for name in names:
            rel = here / (name.split(".")[0] + ".py")
            if (spec.root_dir / rel).is_file():
                out.append((name, None, str(rel)))
    return tuple(out)


def facts_of(obs: Observation | None) -> Facts:
    """The run facts passes use, from an observation of that exact program."""
    if obs is None:
        return Facts()
    stack = obs.signature.stack if obs.signature is not None else ()
    parses = []
    for p in obs.parses:
        try:
            parses.append(
                ParseRecord(
                    file=p["file"],
                    line=int(p["line"]),
                    values=tuple(sorted(p["values"].items())),
                    known_args="parse_known_args" in p.get("caller", ""),
                )
            )
        except (KeyError, TypeError, ValueError):
            continue
    loads = []
    for rec in obs.loads:
        try:
            if rec.get("literal"):
                loads.append(LoadRecord(rec["file"], int(rec["line"]), str(rec["function"]), str(rec["literal"])))
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
    return Facts(stack=tuple(stack), parses=tuple(parses), loads=tuple(loads), seed_sites=tuple(obs.seed_sites),
                 sizes=sizes_of(obs), rank=obs.rank if obs.launcher is not None else None)


def sizes_of(obs: Observation) -> tuple[SizeRecord, ...]:
    """The size reads the run evaluated at its first error (``Watch.sizes``)."""
    out = []
    for rec in obs.sizes:
        try:
            out.append(SizeRecord(str(rec["file"]), str(rec["function"]), str(rec["expression"]), str(rec["literal"]),
                                  str(rec.get("kind", "number"))))
        except (KeyError, TypeError):
            continue
    return tuple(out)


def loop_around_failure(program: Program) -> bool:
    """Whether a ``for`` statement encloses a line of the failing stack."""
    stmts = program.stmts
    for file, line in program.facts.stack:
        cur = program.deps.statement_at(file, line)
        while cur is not None:
            if stmts[cur].kind == "for":
                return True
            cur = stmts[cur].parent
    return False


def library_cut(first: Observation, spec: ScriptSpec, sandbox: Sandbox, saved: Path,
                files: Mapping[str, str] | None = None):
    """The first run's library cut as a fact for passes.  The call the library made is
    written as source when every argument has an exact literal (small tensors, plain
    values) and the literals cost no more than loading the call: the program then loads
    nothing.  Else it loads the saved call from beside
    the file (in every run's copy, and beside the result), and the search counts what
    that file carries.  ``files``: the program's texts; the call uses the names the
    file's top level imports ``torch`` and ``pathlib`` as, and imports them only when it
    does not: an ``import torch`` beside ``trainer.fit(...)`` inside ``main()`` would
    make ``torch`` local to all of ``main`` (an UnboundLocalError at its first line that
    uses it)."""
    cut = first.cut
    if not cut or not saved.is_file() or not cut.get("source"):
        return None, {}
    obj, setup = cut["object"], ""
    if obj.startswith("arg:"):
        # passed to the library without a name: its expression in the user's call
        _, position, param = obj.split(":", 2)
        expr = argument_text(cut["source"], cut.get("entry", ""), int(position), param)
        if expr is None:
            return None, {}
        obj, setup = "_obj", f"_obj = {expr}\n"
    name = library_call_name(spec.script)
    call = f"{obj}.{cut['method']}" if cut.get("method") else obj
    text = (files or {}).get(cut["file"], "")
    bound = {m: module_name(text, m) for m in ("pathlib", "torch")}
    torch = bound["torch"] or "torch"
    attributes = [a for a in cut.get("attributes") or () if isinstance(a, str) and a.isidentifier()]
    recorded = cut.get("call") or {}
    exact = call_source(recorded, EXACT, torch, attributes)
    layout = call_source(recorded, LAYOUT, torch, attributes)
    written = None
    if exact is not None:
        args, keywords, values = exact
        written = (setup + "".join(f"{obj}.{attr} = {value}\n" for attr, value in values)
                   + _within_autocast(f"{call}({', '.join([*args, *(f'{k}={v}' for k, v in keywords)])})\n",
                                      cut.get("autocast") or (), torch))
        written = ("import torch\n" if bound["torch"] is None and re.search(r"\btorch\.", written) else "") + written
    replacement = (
        "".join(f"import {m}\n" for m, n in bound.items() if n is None) + setup
        + f"_call = {torch}.load({bound['pathlib'] or 'pathlib'}.Path(__file__).with_name({name!r}), "
        "weights_only=False)\n"
        + "".join(f"{obj}.{attr} = _call['attributes'][{attr!r}]\n" for attr in attributes)
        + _within_autocast(f"{call}(*_call['args'], **_call['kwargs'])\n", cut.get("autocast") or (), torch)
    )
    carried = None if layout is None else ", ".join([*layout[0], *(v for _, v in (*layout[1], *layout[2]))])
    cost = loaded_cost(saved.stat().st_size, carried)
    # The literals, unless they cost more than loading the call does: sixty-four floats
    # written out are hundreds of tokens, and a cut larger than the statement it replaces
    # is never tried (the framework would stay).  A loaded call is written back with its
    # values drawn afresh after the search, when that still fails the same way.
    if written is not None and count_tokens(written) <= count_tokens(replacement) + FILE_COST + cost:
        return CutRecord(cut["file"], cut["source"], written, cut.get("library", ""), layout=layout), {}
    rel = str(Path(cut["file"]).parent / name) if Path(cut["file"]).parent != Path(".") else name
    sandbox.add_file(rel, saved)
    return (CutRecord(cut["file"], cut["source"], replacement, cut.get("library", ""), loads=name, cost=cost,
                      layout=layout),
            {name: saved})


def call_source(recorded: Mapping, level: str, torch: str, attributes=()):
    """The saved call's (args, keywords, attributes) as source at ``level``
    (``syntax.values``), each keyword and attribute (name, text); None when a part has
    none, or the run did not record the call so."""
    meta = recorded.get("meta")
    if not isinstance(meta, dict) or not isinstance(recorded.get("args"), list):
        return None

    def tensor(where: str) -> str | None:
        return tensor_source(meta[where], level, torch) if where in meta else None

    try:
        args = [value_source(node, tensor, level) for node in recorded["args"]]
        keywords = [(k, value_source(node, tensor, level)) for k, node in (recorded.get("kwargs") or {}).items()]
        saved = recorded.get("attributes") or {}
        values = [(a, value_source(saved[a], tensor, level)) if a in saved else (a, None) for a in attributes]
    except (KeyError, TypeError, AttributeError):
        return None
    if any(a is None for a in args) or any(v is None or not k.isidentifier() for k, v in (*keywords, *values)):
        return None
    return tuple(args), tuple(keywords), tuple(values)


def _within_autocast(line: str, autocast, torch_name: str) -> str:
    """The direct call inside the autocasts the library had entered around it
    (``with torch.autocast('cpu', dtype=torch.bfloat16):``): without them a dtype error of
    mixed precision does not happen, and the framework could never be cut."""
    for device, dtype in reversed([tuple(a) for a in autocast if len(a) == 2]):
        if not (str(device).isidentifier() and re.fullmatch(r"torch\.\w+", str(dtype))):
            continue
        dtype = torch_name + dtype[len("torch"):]
        line = f"with {torch_name}.autocast({device!r}, dtype={dtype}):\n" + "".join(
            f"    {row}\n" for row in line.splitlines())
    return line


def saved_objects(first: Observation, spec: ScriptSpec, sandbox: Sandbox, layout: OutputLayout):
    """The data objects a run saved, as facts for passes/data.py, each file beside the
    main script (in every run's copy, and beside the result).  Named after the result
    (``train.min.train_set.pkl``), like its report: a later reduction to the same
    output replaces them, and no name of the user's is taken."""
    records, files = [], {}
    main_dir = Path(spec.script_rel).parent
    beside = layout.data_dir
    for saved in first.saved_objects:
        try:
            name, cls, path, size = saved["name"], saved["class"], Path(saved["path"]), int(saved["bytes"])
            targets = tuple(str(t) for t in saved.get("targets") or ())
        except (KeyError, TypeError, ValueError):
            continue
        if not all(n.isidentifier() for n in (name, *targets)) or not path.is_file():
            continue
        file_name = layout.object_name('-'.join(targets) or name)
        in_root = spec.root_dir / main_dir / file_name
        if file_name in files or (in_root.exists() and in_root.resolve() != (beside / file_name).resolve()):
            continue  # a file of the user's by that name is neither shadowed nor overwritten
        sandbox.add_file(str(main_dir / file_name) if main_dir != Path(".") else file_name, path)
        records.append(SavedObject(name, cls, file_name, size, str(main_dir) if main_dir != Path(".") else "", targets))
        files[file_name] = path
    return tuple(records), files


def argument_text(source: str, function: str, position: int, keyword: str) -> str | None:
    """The text of the argument at ``position`` (or ``keyword=``) of the call of
    ``function`` in a statement's source."""
    line = source.strip()
    for node in calls_named(line, function):
        if position < len(node.args) and not isinstance(node.args[position], ast.Starred):
            return ast.get_source_segment(line, node.args[position])
        for kw in node.keywords:
            if kw.arg == keyword:
                return ast.get_source_segment(line, kw.value)
    return None
