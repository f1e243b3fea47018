"""Loops around the failure: which iteration each was in (the user's files compiled with
a counter in each loop), and where the run's time went (a sampling thread).  Only in runs
that ask (``Watch.count_loops``, ``Watch.state``)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

from shrinkgpu.worker.probe.paths import is_user_file


def loop_spans(filename: str, roots) -> list[tuple[int, int, int]]:
    """(header line, first body line, last line) of each ``for`` and ``while`` loop of
    one of the user's files; none for a library's or an unreadable file."""
    if not is_user_file(filename, roots):
        return []
    try:
        tree = ast.parse(Path(filename).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return []
    return [
        (node.lineno, node.body[0].lineno, node.end_lineno or node.lineno)
        for node in ast.walk(tree) if isinstance(node, (ast.For, ast.While)) and node.body
    ]


# The names the instrumented code calls, in ``builtins`` so that every module of the
# user's finds them without a global of its own (a name of the ``__x__`` form is never
# mangled in a class body, and ``from m import *`` does not carry it).
ENTER, START, TICK = "__shrinkgpu_enter__", "__shrinkgpu_loop__", "__shrinkgpu_tick__"
# With ``arguments``: each function's arguments as they were when it was called, in a
# local of that name (``entry_arguments`` reads it back).
ARGUMENTS, ARGUMENTS_LOCAL = "__shrinkgpu_arguments__", "__shrinkgpu_entry_arguments__"
# A container argument longer than this is kept as it is, not copied: a copy per call of
# a large list would make the run quadratic.
ARGUMENT_COPY_MAX = 4096
# Frames whose state is kept at once; past it, the entries of frames no longer on the
# stack are dropped (a suspended generator's are kept: it may resume and fail).
STATE_PRUNE_AT = 1 << 16


class _Instrument(ast.NodeTransformer):
    """Each ``for`` of a scope gets ``START(header)`` before it and ``TICK(header)`` as
    the first statement of its body; a scope (module, class body, function) that holds
    one begins with ``ENTER()``.  With ``arguments``, a function with parameters begins
    with ``ARGUMENTS_LOCAL = ARGUMENTS(names, *values)``.  The inserted statements take
    the line of what they precede, so tracebacks, ``inspect`` and the loop spans read the
    user's lines.  (``ast``, not libcst: the tree is compiled, never written back as
    source.)"""

    def __init__(self, arguments: bool = False):
        self.found = False
        self.arguments = arguments
        # header line -> (first body line, last line), as written (``loop_spans``'s)
        self.spans: dict[int, tuple[int, int]] = {}

    def _scope(self, node):
        if any(_decorator_name(d) in BYTECODE_COMPILERS for d in getattr(node, "decorator_list", ())):
            return node  # its bytecode is compiled again, where a call of ours would not type
        outer, self.found = self.found, False
        self.generic_visit(node)
        if self.found:
            body = node.body
            at = 1 if _docstring(body) else 0  # the docstring stays the docstring
            if isinstance(node, ast.Module):
                while at < len(body) and isinstance(body[at], ast.ImportFrom) and body[at].module == "__future__":
                    at += 1
            anchor = body[at] if at < len(body) else body[-1]
            body.insert(at, _call(ENTER, (), anchor))
        if self.arguments and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and not _lists_its_locals(node):
            names = _parameters(node.args)
            if names:
                at = 1 if _docstring(node.body) else 0
                anchor = node.body[at] if at < len(node.body) else node.body[-1]
                node.body.insert(at, _keep_arguments(names, anchor))
        self.found = outer
        return node

    visit_Module = visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scope

    def visit_For(self, node):
        self.spans[node.lineno] = (node.body[0].lineno, node.end_lineno or node.lineno)
        self.generic_visit(node)
        self.found = True
        node.body.insert(0, _call(TICK, (node.lineno,), node.body[0]))
        return [_call(START, (node.lineno,), node), node]


# Decorators that compile a function from its bytecode (numba's): a counting call in it
# would be a name their compiler cannot type, a first error of ours.  Compilers that read
# the source (``torch.jit.script``, ``triton.jit``) or trace the calls
# (``torch.compile``) need nothing.
BYTECODE_COMPILERS = frozenset({"jit", "njit", "vectorize", "guvectorize", "cfunc", "generated_jit", "stencil"})


def _decorator_name(node) -> str | None:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Attribute) and node.value.attr == "jit" or \
                isinstance(node.value, ast.Name) and node.value.id == "torch":
            return None  # torch.jit.script, torch.jit.ignore...: from the source
        return node.attr
    return node.id if isinstance(node, ast.Name) else None


def _docstring(body: list) -> bool:
    return bool(body) and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
        and isinstance(body[0].value.value, str)


def _lists_its_locals(node) -> bool:
    """Whether a function calls ``locals()`` or ``vars()`` (``config = dict(locals())``,
    ``json.dump(locals(), fh)``): a local of ours would be among what it lists."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("locals", "vars")
               and not n.args for n in ast.walk(node))


def _parameters(args: ast.arguments) -> list[str]:
    """A function's parameter names in the order ``inspect.getargvalues`` knows them."""
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    names += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
    return names


def _keep_arguments(names: list[str], where) -> ast.stmt:
    call = ast.Call(ast.Name(ARGUMENTS, ast.Load()),
                    [ast.Constant(tuple(names)), *(ast.Name(n, ast.Load()) for n in names)], [])
    stmt = ast.Assign([ast.Name(ARGUMENTS_LOCAL, ast.Store())], call)
    for node in ast.walk(stmt):
        ast.copy_location(node, where)
        node.end_lineno, node.end_col_offset = where.lineno, where.col_offset
    return stmt


def entry_arguments(frame) -> dict[str, Any]:
    """``frame``'s arguments as its function was called (``LoopCounter(arguments=True)``):
    a parameter the function rebound (``x = self.embed(x)``) or a dict it emptied
    (``labels = inputs.pop("labels")``) as it came in; empty when that was not kept."""
    kept = frame.f_locals.get(ARGUMENTS_LOCAL)
    return kept if isinstance(kept, dict) else {}


def _call(name: str, args: tuple[int, ...], where) -> ast.stmt:
    stmt = ast.Expr(ast.Call(ast.Name(name, ast.Load()), [ast.Constant(a) for a in args], []))
    for node in ast.walk(stmt):
        ast.copy_location(node, where)
        node.end_lineno, node.end_col_offset = where.lineno, where.col_offset
    return stmt


def instrumented(source: bytes | str, filename: str, arguments: bool = False):
    """The code of ``source`` with its ``for`` loops counted (``LoopCounter``) and the
    loops' spans (header line -> (first body line, last line)), or None when it cannot
    be parsed (Python's own compile then says why); with ``arguments``, each function
    keeps its arguments as they came in."""
    try:
        tree = ast.parse(source, filename)
    except (SyntaxError, ValueError):
        return None
    counted = _Instrument(arguments)
    tree = counted.visit(tree)
    return compile(tree, filename, "exec", dont_inherit=True), counted.spans


class LoopCounter:
    """Which iteration each ``for`` loop of the user's code is in, per frame, and which
    call of its function (or module) that frame is.

    Not a tracer: on Python 3.11, ``sys.settrace`` slows every Python frame, torch's own
    too, even where the trace function declines it (about 2x on a reinforcement-learning
    loop, 3x on plain Python).  The user's files are compiled with a call at the start of
    each loop's body instead (``instrumented``), which costs one Python call per
    iteration: the main script by the probe, the user's modules by the import system's
    loader (``install``).  A loop that is iterating at the failure has had its body
    started ``iteration + 1`` times since the loop was last entered.

    Under ``torch.compile`` the calls return at once (``torch.compiler.is_compiling``
    is a constant there), so Dynamo traces nothing of them: no graph break, no guard.

    With ``arguments``, each of the user's functions also keeps its arguments as they
    came in (``entry_arguments``): the library cut calls the user's function directly
    with them, and at the failure a parameter may hold something else.  One more Python
    call per call of a user's function, and a shallow copy of its dict and list
    arguments; only the first run of the original asks for it."""

    def __init__(self, roots: tuple[str, ...], arguments: bool = False):
        self.roots = roots
        self.arguments = arguments
        self.loops: dict[str, dict[int, tuple[int, int]]] = {}  # file -> header line -> (body start, end)
        self.state: dict[int, list[Any]] = {}  # id(frame) -> [code, {header: iteration}, call]
        self.calls: dict[Any, int] = {}  # code object -> how many frames of it were entered
        self._compiling = self._compiling_once_torch_is_here

    # -- compiling the user's files ----------------------------------------------------------
    def compile(self, source: bytes | str, filename: str):
        """The code of one of the user's files, counted; plain for any other file."""
        if is_user_file(filename, self.roots):
            counted = instrumented(source, filename, self.arguments)
            if counted is not None:
                code, self.loops[filename] = counted
                return code
        return compile(source, filename, "exec", dont_inherit=True)

    def install(self) -> None:
        """The hooks in ``builtins``, and the user's modules compiled counted when they are
        imported (``SourceFileLoader.get_code``: what ``import``, ``runpy.run_module`` and
        ``spec_from_file_location`` all use).  For this process's life: a run's process
        ends with it."""
        import builtins
        import importlib.machinery

        self._compiling = self._compiling_once_torch_is_here
        self._compiling_once_torch_is_here()
        setattr(builtins, ENTER, self.enter)
        setattr(builtins, START, self.start)
        setattr(builtins, TICK, self.tick)
        setattr(builtins, ARGUMENTS, self.keep_arguments)
        loader = importlib.machinery.SourceFileLoader
        plain = loader.get_code
        counter = self

        def get_code(self, fullname):
            path = self.get_filename(fullname)
            if not is_user_file(path, counter.roots):
                return plain(self, fullname)
            # (no bytecode cache: neither read, which would skip the counting, nor written)
            return counter.compile(self.get_data(path), path)

        loader.get_code = get_code

    def _compiling_once_torch_is_here(self) -> bool:
        # (the probe has imported torch before the script runs whenever it watches torch
        # calls; otherwise the script's own import is found at the next hook)
        torch = sys.modules.get("torch")
        compiler = getattr(torch, "compiler", None) if torch is not None else None
        if callable(getattr(compiler, "is_compiling", None)):
            self._compiling = compiler.is_compiling
            return compiler.is_compiling()
        return False

    # -- the hooks (called from the user's code) -----------------------------------------------
    def enter(self) -> None:
        if self._compiling():
            return
        frame = sys._getframe(1)
        code = frame.f_code
        n = self.calls[code] = self.calls.get(code, 0) + 1
        key = id(frame)
        self.state.pop(key, None)  # a new frame at a dead one's address: last in the order
        self.state[key] = [code, {}, n]
        if len(self.state) > STATE_PRUNE_AT:
            self._prune(frame)

    def start(self, header: int) -> None:
        if self._compiling():
            return
        self._frame_state(sys._getframe(1))[1][header] = -1

    def tick(self, header: int) -> None:
        if self._compiling():
            return
        frame = sys._getframe(1)
        state = self._frame_state(frame)
        counts = state[1]
        counts[header] = counts.get(header, -1) + 1
        self.ticked(frame, header, state)

    def keep_arguments(self, names: tuple[str, ...], *values) -> dict[str, Any] | None:
        if self._compiling():
            return None
        return {name: _entry_copy(value) for name, value in zip(names, values)}

    def ticked(self, frame, header: int, state: list[Any]) -> None:
        """After the body of loop ``header`` started in ``frame`` (``state``: that frame's);
        for a subclass that acts there."""

    def _frame_state(self, frame) -> list[Any]:
        state = self.state.get(id(frame))
        if state is None or state[0] is not frame.f_code:
            # (a frame whose ``ENTER`` was not seen: code compiled while compiling)
            n = self.calls[frame.f_code] = self.calls.get(frame.f_code, 0) + 1
            state = self.state[id(frame)] = [frame.f_code, {}, n]
        return state

    def _prune(self, frame) -> None:
        import inspect

        live = set()
        while frame is not None:
            live.add(id(frame))
            frame = frame.f_back
        generators = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
        self.state = {key: state for key, state in self.state.items()
                      if key in live or state[0].co_flags & generators}

    # -- what the failure was in -----------------------------------------------------------------
    def at(self, frames: list[tuple[Any, int]], rel) -> list[list[Any]]:
        """[file, header line, iteration, call] for the loops around each (frame, line);
        ``call``: which frame of its function (or module) it was, counting from 1."""
        out = []
        for frame, line in frames:
            state = self.state.get(id(frame))
            if state is None or state[0] is not frame.f_code:
                continue
            filename = frame.f_code.co_filename
            loops = self.loops.get(filename, {})
            for header, iteration in sorted(state[1].items()):
                body_start, end = loops.get(header, (0, -1))
                if iteration >= 0 and body_start <= line <= end:
                    out.append([rel(filename), header, iteration, state[2]])
        return out


_COPIED = (dict, list, set, bytearray)


def _entry_copy(value):
    """A shallow copy of a builtin container (what a function empties or fills in place
    is what it came in with); anything else as it is (a tensor changed in place, an
    object's attributes, are not undone)."""
    if type(value) in _COPIED:
        return value.copy() if len(value) <= ARGUMENT_COPY_MAX else value
    if isinstance(value, _COPIED) and len(value) <= ARGUMENT_COPY_MAX:
        import copy

        try:  # (``copy.copy`` keeps a subclass's type, where ``dict.copy`` makes a dict)
            copied = copy.copy(value)
        except Exception:  # a subclass whose copy needs more than itself
            return value
        return copied if type(copied) is type(value) else value
    return value


class LoopClock:
    """Where the run's time goes, by loop: a thread that looks at the main thread's stack
    every few milliseconds and counts, for each ``for``/``while`` of the user's code that
    a frame is inside, one sample.  On with ``count_loops`` only (the original's first
    run), beside the loop counter: they rank loops, they are not timings.

    A sampling thread rather than a profiling signal: a signal interrupts the script's own
    system calls, which some C extensions do not retry."""

    INTERVAL = 0.005

    def __init__(self, roots: tuple[str, ...], rel):
        import threading

        self.roots = roots
        self.rel = rel
        self.samples = 0
        self.hits: dict[tuple[str, int], int] = {}
        self.spans: dict[str, list[tuple[int, int, int]]] = {}  # file -> (header, body start, end)
        self._main = threading.main_thread().ident
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="shrinkgpu-loop-clock", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> list[list[Any]]:
        """[file, header line, share of the samples] for loops that got any, largest first."""
        self._stop.set()
        self._thread.join(timeout=1.0)
        if not self.samples:
            return []
        ranked = sorted(self.hits.items(), key=lambda kv: -kv[1])
        return [[file, line, round(n / self.samples, 4)] for (file, line), n in ranked[:32]]

    def _spans_of(self, filename: str) -> list[tuple[int, int, int]]:
        found = self.spans.get(filename)
        if found is None:
            found = loop_spans(filename, self.roots)
            self.spans[filename] = found
        return found

    def _run(self) -> None:
        while not self._stop.wait(self.INTERVAL):
            frame = sys._current_frames().get(self._main)
            self.samples += 1
            seen = set()
            while frame is not None:
                filename = frame.f_code.co_filename
                line = frame.f_lineno
                for header, _body_start, end in self._spans_of(filename):
                    if header <= line <= end:
                        seen.add((self.rel(filename), header))
                frame = frame.f_back
            for key in seen:
                self.hits[key] = self.hits.get(key, 0) + 1
            del frame
