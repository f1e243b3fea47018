"""The compiled code alone: what a torch.compile failure needs to be written as a
standalone script (the source of the compiled function or module and of what it reads,
the options and settings it was compiled with, the inputs it was called with), kept as
the error goes up.

Dynamo fails while it traces, before the compiled code ran, so the inputs held by
``compile_wrapper``'s frame are the ones the call was given.  A compiled module is built
as it was built: the arguments its ``__init__`` was called with are noted as it calls
``nn.Module.__init__`` (``watch_module_construction``); its weights go in a state dict
for the exact level.
"""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import logging
import os
import sys
import textwrap
import types
import weakref
from typing import Any

from shrinkgpu.worker.probe.ops import RAISED_MAX_BYTES, code_literal, same_value, save_call

# torch.compile(fn, **options) as it was called and the settings then, by the id of what
# was compiled; the object itself is held too, so that its id is not reused.
_OPTIONS: dict[int, tuple[Any, dict[str, Any], list[str]]] = {}
_BUILT: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # module -> how it was built
_HELPERS_MAX = 12  # functions and classes of the script the compiled function may pull in


def watch_compile_options() -> None:
    """Note the options of every ``torch.compile`` call (``fullgraph``, ``dynamic``,
    ``backend``, ``mode``) and the compile settings in force then
    (``torch._dynamo.config.recompile_limit = 4``): the compiled object does not keep
    them in a form that can be written back, and compiling changes some settings itself."""
    import torch

    real = torch.compile
    if getattr(real, "_shrinkgpu_options", False):
        return
    defaults = {k: p.default for k, p in inspect.signature(real).parameters.items()
                if p.default is not inspect.Parameter.empty}

    def note(fn, options):
        if id(fn) not in _OPTIONS:  # (the decorator form calls torch.compile again, with every option)
            set_ = {k: v for k, v in options.items() if k not in defaults or not same_value(v, defaults[k])}
            _OPTIONS[id(fn)] = (fn, set_, _settings())

    @functools.wraps(real)
    def compile(model=None, **options):  # noqa: A001  (as torch names it)
        if model is None:
            decorate = real(**options)

            def decorator(fn):
                note(fn, options)
                return decorate(fn)

            return decorator
        note(model, options)
        return real(model, **options)

    compile._shrinkgpu_options = True
    torch.compile = compile


def stay_eager() -> bool:
    """Run the script with its compiled code run eagerly (``Watch.eager``), and keep it so
    whatever stance the script sets itself: a training script that asks for
    ``set_stance("fail_on_recompile")`` after its warm-up would otherwise compile again
    and fail as it does compiled, which is no eager run.  False where the torch has no
    stances (before 2.6): the run compiles, and says so by failing alike."""
    import torch

    stance = getattr(getattr(torch, "compiler", None), "set_stance", None)
    if stance is None:
        return False
    stance("force_eager")
    try:
        from torch._dynamo import decorators, eval_frame

        forced = eval_frame._stance

        def kept(_asked):
            # set_stance (as a call, a context manager, a decorator) sets through this
            # name: what it asks for is left out, what it gets back is what it restores
            return eval_frame._set_stance(forced)

        decorators._set_stance = kept
    except (ImportError, AttributeError):  # a torch whose internals moved: the stance as it is
        pass
    return True


def watch_module_construction() -> None:
    """Note the arguments each ``nn.Module`` was built with, read from the outermost
    ``__init__`` of the object when it calls ``nn.Module.__init__``: a compiled module is
    then written as it was built (``Refiner(ModelConfig(width=32))``), not pickled."""
    import torch

    Module = torch.nn.Module
    real = Module.__init__
    if getattr(real, "_shrinkgpu_built", False):
        return

    @functools.wraps(real)
    def __init__(self, *args, **kwargs):
        try:
            # (a module built inside compiled code: Dynamo would trace the note itself)
            if not torch.compiler.is_compiling() and self not in _BUILT:
                _BUILT[self] = _init_arguments(self, sys._getframe(1))
        except Exception:  # a note must never change the script's behaviour
            pass
        real(self, *args, **kwargs)

    __init__._shrinkgpu_built = True
    Module.__init__ = __init__


def _init_arguments(obj, frame) -> tuple[list[tuple[str, Any]], tuple, dict[str, Any]] | None:
    """The named arguments, extra positionals and extra keywords of the outermost
    ``__init__`` running for ``obj`` (the most derived class's)."""
    outer = None
    while frame is not None and frame.f_code.co_name == "__init__":
        code = frame.f_code
        if not code.co_varnames or frame.f_locals.get(code.co_varnames[0]) is not obj:
            break
        outer, frame = frame, frame.f_back
    if outer is None:
        return None
    info = inspect.getargvalues(outer)
    named = [(n, info.locals[n]) for n in info.args[1:] if n in info.locals]
    code = outer.f_code
    kwonly = code.co_varnames[code.co_argcount:code.co_argcount + code.co_kwonlyargcount]
    named += [(n, info.locals[n]) for n in kwonly if n in info.locals]
    extra = tuple(info.locals.get(info.varargs, ())) if info.varargs else ()
    more = dict(info.locals.get(info.keywords, {})) if info.keywords else {}
    return named, extra, more


def _noted(fn) -> tuple[dict[str, Any], list[str]]:
    """The options ``fn`` was compiled with, and the settings then.  Dynamo may hold the
    function a decorator wrapped (``@torch.no_grad()`` under ``@torch.compile``), or the
    wrapper: both are the same compiled function."""
    if id(fn) in _OPTIONS:
        return _OPTIONS[id(fn)][1:]
    mine = _wrapped_chain(fn)
    for obj, options, settings in _OPTIONS.values():
        theirs = _wrapped_chain(obj)
        if any(o is f for o in theirs for f in mine):
            return options, settings
    return {}, _settings()


def _noted_module(module):
    """What torch.compile was given for ``module``: the module, or its bound ``_call_impl``
    (``module.compile()``)."""
    for obj, _options, _settings in _OPTIONS.values():
        if obj is module or getattr(obj, "__self__", None) is module:
            return obj
    return None


def _rebuilt(value) -> dict[str, Any] | None:
    """The keywords that build an object of the script's like ``value`` (a configuration
    that keeps each argument as an attribute of the same name, ``self.hidden = hidden``),
    when building it with them gives the same attributes; else None."""
    cls = type(value)
    try:
        params = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return None
    state = vars(value)
    named = [p for p in list(params.values())[1:] if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    keywords: dict[str, Any] = {}
    for p in named:
        if p.name in state:
            if p.default is inspect.Parameter.empty or not same_value(state[p.name], p.default):
                keywords[p.name] = state[p.name]
        elif p.default is inspect.Parameter.empty:
            return None
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        keywords.update({k: v for k, v in state.items() if k not in {p.name for p in named}})
    try:
        again = cls(**keywords)
    except Exception:
        return None
    mine = vars(again)
    if mine.keys() != state.keys() or not all(same_value(mine[k], state[k]) for k in state):
        return None
    return keywords


def module_source(module, roots: tuple[str, ...]) -> str | None:
    """How ``module`` was built, as source that needs no import beyond ``torch`` and the
    script's own classes (``torch.nn.GRU(3, 32, batch_first=True)``, ``Tagger(hidden=16)``),
    with what was done to it after (its dtype, device, eval mode); None when its
    construction was not seen or an argument has no source form.  Its weights are those
    of a fresh construction: whether the bug needs the trained ones is for a run to say."""
    defs = _Definitions(roots)
    try:
        built = defs.module_expr(module, "the module") + "".join(_after_build(module))
    except (NoSource, OSError, TypeError, SyntaxError):
        return None
    return None if defs.modules or defs.values or defs.objects else built


def module_definition(module, roots: tuple[str, ...], what: str) -> tuple[list[str], str]:
    """What a standalone script needs to build ``module`` as it was built: the lines
    before it (imports, the script's constants, the source of its class and of what that
    reads) and the expression (``RNNModel('LSTM', 1386, 96, 96, 2)``, with its dtype,
    device and eval mode after).  NoSource says why it cannot be written; ``what`` names
    the module in that reason."""
    defs = _Definitions(roots)
    built = defs.module_expr(module, what) + "".join(_after_build(module))
    if defs.objects:  # (a class that reads a module built at the top level of the script)
        raise NoSource(f"{what}'s class reads modules the script built: " + ", ".join(defs.objects))
    settings = defs.constants()
    return defs.imports() + ([""] + settings if settings else []) + defs.sources(), built


def _after_build(module) -> list[str]:
    """What was done to a module after it was built that its construction does not
    redo: its dtype, its device, eval mode."""
    import torch

    after = []
    params = [p for p in module.parameters()] + [b for b in module.buffers() if b.is_floating_point()]
    floating = [p for p in params if p.is_floating_point()]
    if floating and floating[0].dtype != torch.get_default_dtype():
        after.append(f".to({floating[0].dtype})")
    if params and params[0].device.type != "cpu":
        after.append(f".to({str(params[0].device)!r})")
    if not module.training:
        after.append(".eval()")
    return after


def _wrapped_chain(fn) -> list:
    chain = [fn]
    while len(chain) < 8 and getattr(chain[-1], "__wrapped__", None) is not None:
        chain.append(chain[-1].__wrapped__)
    return chain


# Settings torch.compile changes itself as it compiles (seen in torch 2.13): not the
# user's, and noise in a script.
_SET_BY_COMPILING = ("torch._inductor.config.deterministic =",
                     "torch._functorch.config.fake_tensor_allow_unsafe_data_ptr_access =")


def _settings() -> list[str]:
    lines = []
    for owner in ("torch._dynamo.config", "torch._inductor.config", "torch._functorch.config"):
        try:
            module = sys.modules.get(owner)
            found = module.codegen_config().splitlines() if module is not None else []
        except Exception:
            found = []
        # (a cache directory is where this run kept its artifacts, not a setting of the bug)
        lines += [ln for ln in found if ln.strip() and "cache_dir" not in ln and not ln.startswith(_SET_BY_COMPILING)]
    return lines


def _stance() -> list[str]:
    """``torch.compiler.set_stance(...)`` as it stood at the failing call: a stance set
    after compiling (``"fail_on_recompile"`` once warmed up) decides the first compile of
    the function alone as well."""
    try:
        from torch._dynamo import eval_frame

        stance = eval_frame._stance
        if stance.stance == "default" and not stance.skip_guard_eval_unsafe:
            return []
        extra = ", skip_guard_eval_unsafe=True" if stance.skip_guard_eval_unsafe else ""
        if stance.backend is not None:
            backend = code_literal(stance.backend)
            extra += f", force_backend={backend}" if backend is not None else ""
        return [f"torch.compiler.set_stance({stance.stance!r}{extra})"]
    except Exception:  # (another torch keeps it elsewhere: the check in a fresh interpreter says)
        return []


def keep_compiled_call(tb, roots: tuple[str, ...], raised: tuple[str, list]) -> None:
    """With ``Watch.keep_raised``: when the error came out of a compiled function's entry
    (``compile_wrapper``), save its inputs like a failing call's and write beside them
    the source that calls it: ``torch.compile(forward, fullgraph=True)(x0)``.  What
    cannot be written is recorded with the reason."""
    directory, records = raised
    try:
        frame = _compile_frame(tb)
        if frame is None:
            return
        fn, args, kwargs = frame.f_locals.get("fn"), frame.f_locals.get("args", ()), frame.f_locals.get("kwargs", {})
        try:
            preamble, call, built = _source_of(fn, roots)
        except NoSource as exc:
            records.append({"op": "torch.compile", "call": None, "path": None, "compiled": True, "error": str(exc)})
            return

        def stand_in(*a, **k):  # named as the call the extraction writes
            raise NotImplementedError

        stand_in.__module__, stand_in.__name__, stand_in.__qualname__ = "torch", call, call
        # the function's own keywords were all passed; a module's weights go in the .pt
        # for the exact level (a state dict loads without unpickling code)
        extra: dict[str, Any] = {"preamble": preamble, "nondefault": sorted(kwargs)}
        state = None
        if built is not None:
            name, expr, module = built
            extra["module"] = {"name": name, "build": expr}
            state = _state_of(module)
            extra["module"]["state"] = state is not None
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, f"raised-{len(records)}.pt")
        save_call(stand_in, tuple(args), dict(kwargs), path, extra=extra,
                  more_tensors={"module": state} if state is not None else None)
        records.append({"op": f"torch.{call}", "call": None, "path": path, "compiled": True})
    except Exception as exc:  # an offer: the script's own error must stay what it was
        records.append({"op": "torch.compile", "call": None, "path": None, "compiled": True,
                        "error": f"{type(exc).__name__}: {exc}"})


class NoSource(Exception):
    """Why something of the script cannot be written as source (its words)."""


def _state_of(module) -> dict[str, Any] | None:
    """The module's state dict on the CPU, unless it is too large to keep."""
    import torch

    state = {k: v.detach().cpu() for k, v in module.state_dict().items() if isinstance(v, torch.Tensor)}
    return state if sum(v.numel() * v.element_size() for v in state.values()) <= RAISED_MAX_BYTES else None


def _compile_frame(tb):
    """The outermost frame of Dynamo's entry for a compiled function, if the error went
    through one."""
    while tb is not None:
        code = tb.tb_frame.f_code
        if (code.co_name == "compile_wrapper"
                and code.co_filename.replace(os.sep, "/").endswith("_dynamo/eval_frame.py")):
            return tb.tb_frame
        tb = tb.tb_next
    return None


def _source_of(fn, roots: tuple[str, ...]) -> tuple[list[str], str]:
    """The lines that define ``fn`` and what it reads, and the compile call that wraps it
    (``compile(forward, fullgraph=True)``)."""
    import torch

    defs = _Definitions(roots)
    module = fn if isinstance(fn, torch.nn.Module) else getattr(fn, "__self__", None)
    if isinstance(module, torch.nn.Module):
        fn = _noted_module(module) or fn
        name = "model"
        defs.built = (name, defs.module_expr(module, "the compiled module") + "".join(_after_build(module)), module)
    else:
        if not isinstance(fn, types.FunctionType):
            raise NoSource(f"the compiled callable is a {type(fn).__qualname__}, not a function")
        if fn.__name__ == "<lambda>":
            raise NoSource("the compiled callable is a lambda: its source is not a definition of its own")
        defs.add(fn, compiled=True)
        name = fn.__name__
    chosen, config = _noted(fn)
    options = []
    for key, value in chosen.items():
        text = code_literal(value)
        if text is None and callable(value):
            text = defs.name_for(key, value)
        if text is None and isinstance(value, dict):  # options={"max_autotune": True, ...}
            try:
                text = defs.value_expr(value, f"its torch.compile option {key}=")
            except NoSource:
                text = None
        if text is None:
            raise NoSource(f"its torch.compile option {key}= is a {type(value).__qualname__}, which has no source form")
        options.append(f"{key}={text}")
    settings = config + _stance() + defs.constants()
    preamble = defs.imports() + ([""] + settings if settings else []) + defs.sources()
    return preamble, f"compile({', '.join([name] + options)})", defs.built


class _Definitions:
    """The compiled function's source and the definitions of what it reads: imports for
    modules and importable objects, assignments for literals, the source of the script's
    own functions and classes."""

    def __init__(self, roots: tuple[str, ...]):
        self.roots = roots
        self.modules: dict[str, str] = {}  # name -> import line
        self.values: dict[str, str] = {}  # name -> assignment
        self.defined: dict[str, str] = {}  # name -> source, in the order they were found
        self.objects: dict[str, str] = {}  # name -> the line that builds a module it reads
        self.seen: set[int] = set()
        self.built: tuple[str, str, Any] | None = None  # a compiled module: its name, how to build it, itself

    def module_expr(self, module, what: str) -> str:
        """The expression that builds ``module`` as it was built."""
        import torch

        cls = type(module)
        if self._own(cls):
            self.add(cls)
            ref = cls.__name__
        elif cls.__module__.startswith("torch.nn") and getattr(torch.nn, cls.__name__, None) is cls:
            ref = f"torch.nn.{cls.__name__}"
        else:
            imported = self._import_of(cls.__name__, cls)
            if imported is None:
                raise NoSource(f"{what} is a {cls.__qualname__}, which cannot be imported")
            self.modules[cls.__name__] = imported
            ref = cls.__name__
        built = _BUILT.get(module)
        if built is None:
            raise NoSource(f"how {what} ({cls.__qualname__}) was built was not seen")
        named, extra, more = built
        try:
            params = inspect.signature(cls.__init__).parameters
        except (TypeError, ValueError):
            params = {}
        parts, by_keyword = [], False
        for key, value in named:
            default = params[key].default if key in params else inspect.Parameter.empty
            if default is not inspect.Parameter.empty and same_value(value, default):
                by_keyword = True  # (a later argument then goes by its name)
                continue
            text = self.value_expr(value, f"{cls.__name__}'s argument {key}")
            kind = params[key].kind if key in params else inspect.Parameter.POSITIONAL_OR_KEYWORD
            # (a flag reads better by its name: ``bias=False``; every later one must follow)
            by_keyword = (by_keyword or kind is inspect.Parameter.KEYWORD_ONLY or isinstance(value, bool)
                          or value is None)
            parts.append(f"{key}={text}" if by_keyword else text)
        if extra:  # (after *args, nothing was left out by its default)
            parts += [self.value_expr(v, f"{cls.__name__}'s argument") for v in extra]
        parts += [f"{k}={self.value_expr(v, f'{cls.__name__} argument {k}')}" for k, v in more.items()]
        return f"{ref}({', '.join(parts)})"

    def value_expr(self, value, what: str) -> str:
        """An argument of a module's construction as source: a literal, a module, a
        dataclass of the script's, a list or tuple of those."""
        import dataclasses

        import torch

        text = code_literal(value)
        if text is not None:
            return text
        if isinstance(value, torch.nn.Module):
            return self.module_expr(value, what)
        if isinstance(value, (list, tuple)) and len(value) <= 64:
            items = [self.value_expr(v, what) for v in value]
            if isinstance(value, tuple):
                return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
            return f"[{', '.join(items)}]"
        if isinstance(value, dict) and all(isinstance(k, str) for k in value):
            return "{" + ", ".join(f"{k!r}: {self.value_expr(v, what)}" for k, v in value.items()) + "}"
        if dataclasses.is_dataclass(value) and not isinstance(value, type) and self._own(type(value)):
            self.add(type(value))
            fields = [f for f in dataclasses.fields(value) if f.init and not (
                f.default is not dataclasses.MISSING and same_value(getattr(value, f.name), f.default))]
            parts = [f"{f.name}={self.value_expr(getattr(value, f.name), what)}" for f in fields]
            return f"{type(value).__name__}({', '.join(parts)})"
        if self._own(type(value)) and hasattr(value, "__dict__"):
            built = _rebuilt(value)
            if built is not None:
                self.add(type(value))
                parts = [f"{k}={self.value_expr(v, what)}" for k, v in built.items()]
                return f"{type(value).__name__}({', '.join(parts)})"
        raise NoSource(f"{what} is a {type(value).__qualname__}, which has no source form")

    def add(self, obj, compiled: bool = False) -> None:
        if id(obj) in self.seen:
            return
        self.seen.add(id(obj))
        if len(self.defined) >= _HELPERS_MAX:
            raise NoSource(f"the compiled function reads more than {_HELPERS_MAX} functions and classes of the script")
        try:
            source = textwrap.dedent(inspect.getsource(obj))
        except (OSError, TypeError) as exc:
            raise NoSource(f"the source of {obj.__qualname__} could not be read ({exc})") from None
        tree = ast.parse(source)
        node = tree.body[0]
        if compiled and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.decorator_list:
            # torch.compile itself is written at the call; the decorators under it stay,
            # and the definition keeps its text (comments and all) from there on
            kept = _below_compile(node.decorator_list, obj.__globals__)
            start = kept[0].lineno if kept else node.lineno
            source = "\n".join(source.splitlines()[start - 1:]) + "\n"
            node = ast.parse(source).body[0]
        name = obj.__name__
        closure = {}
        if isinstance(obj, types.FunctionType) and obj.__closure__:
            for var, cell in zip(obj.__code__.co_freevars, obj.__closure__):
                try:
                    closure[var] = cell.cell_contents
                except ValueError:
                    pass
        scope = getattr(obj, "__globals__", None)
        if scope is None:
            scope = vars(sys.modules.get(getattr(obj, "__module__", ""), types.ModuleType("_")))
        for free in sorted(_free_names(node) - {name}):
            if free in closure:
                self.resolve(free, closure[free])
            elif free in scope:
                self.resolve(free, scope[free])
        self.defined[name] = source.rstrip("\n")

    def resolve(self, name: str, value) -> None:
        import torch

        if isinstance(value, types.ModuleType):
            module = value.__name__
            if module == name:
                line = f"import {module}"
            elif "." in module and module.rsplit(".", 1)[1] == name:
                line = f"from {module.rsplit('.', 1)[0]} import {name}"
            else:
                line = f"import {module} as {name}"
            if name != "torch":
                self.modules[name] = line
            return
        if self._own(value):
            self.add(value)
            return
        defined = getattr(value, "_init_fn", None)  # a torch.library.custom_op of the script's
        if defined is not None and self._own(defined):
            self.seen.add(id(value))
            self.add(defined)  # (its decorator makes the op again)
            fake = getattr(value, "_abstract_fn", None)
            if fake is not None and self._own(fake):
                self.add(fake)  # written as ``@op.register_fake``
            return
        if isinstance(value, logging.Logger):
            self.modules["logging"] = "import logging"
            self.values[name] = f"{name} = logging.getLogger({value.name!r})"
            return
        text = code_literal(value)
        if text is not None and not isinstance(value, torch.Tensor):
            self.values[name] = f"{name} = {text}"
            return
        imported = self._import_of(name, value)
        if imported is not None:
            self.modules[name] = imported
            return
        if isinstance(value, torch.nn.Module):  # built as it was built, after the definitions
            self.objects[name] = (f"{name} = {self.module_expr(value, f'`{name}`')}"
                                  f"{''.join(_after_build(value))}")
            return
        raise NoSource(f"the compiled function reads `{name}`, a {type(value).__qualname__}, which has no "
                        "source form")

    def name_for(self, key: str, value) -> str | None:
        """A callable option (``backend=my_backend``) by the name it is written with."""
        if self._own(value):
            self.add(value)
            return value.__name__
        imported = self._import_of(getattr(value, "__name__", key), value)
        if imported is None:
            return None
        self.modules[value.__name__] = imported
        return value.__name__

    def _own(self, value) -> bool:
        """A function or class of the user's program (whose source the script carries)."""
        if not isinstance(value, (types.FunctionType, type)):
            return False
        try:
            path = os.path.abspath(inspect.getsourcefile(value) or "")
        except TypeError:
            return False
        return any(path.startswith(root + os.sep) or path == root for root in self.roots)

    @staticmethod
    def _import_of(name: str, value) -> str | None:
        module, qual = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
        if not module or not qual or "." in qual or module == "__main__":
            return None
        try:
            if getattr(sys.modules[module], qual) is not value:
                return None
        except (KeyError, AttributeError):
            return None
        # torch's own functions as users write them (torch.relu is torch._C._VariableFunctions.relu)
        public = module.split(".")
        while len(public) > 1 and public[-1].startswith("_"):
            public.pop()
        home = ".".join(public)
        if home != module and getattr(sys.modules.get(home), qual, None) is value:
            module = home
        return f"from {module} import {qual}" + ("" if qual == name else f" as {name}")

    def imports(self) -> list[str]:
        return sorted(set(self.modules.values()) | {"import torch"}, key=lambda ln: (ln.startswith("from "), ln))

    def constants(self) -> list[str]:
        return list(self.values.values())

    def sources(self) -> list[str]:
        out: list[str] = []
        for source in self.defined.values():  # (what a definition reads was added before it)
            out += ["", ""] + source.splitlines()
        out += ["", ""]
        return out + list(self.objects.values())


def _below_compile(decorators: list[ast.expr], scope: dict) -> list[ast.expr]:
    """The decorators applied before torch.compile (those written under it)."""
    for i, dec in enumerate(decorators):
        target = dec.func if isinstance(dec, ast.Call) else dec
        text = ast.unparse(target)
        value = scope.get(text) if isinstance(target, ast.Name) else None
        if "compile" in text or "optimize" in text or getattr(value, "_shrinkgpu_options", False):
            return decorators[i + 1:]
    return decorators


def _free_names(node: ast.AST) -> set[str]:
    """Names a definition reads and does not bind: the globals it needs."""
    loaded: set[str] = set()
    bound: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            (loaded if isinstance(sub.ctx, ast.Load) else bound).add(sub.id)
        elif isinstance(sub, ast.arg):
            bound.add(sub.arg)
        elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and sub is not node:
            bound.add(sub.name)
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in sub.names)
    return {n for n in loaded - bound if not hasattr(builtins, n)}
