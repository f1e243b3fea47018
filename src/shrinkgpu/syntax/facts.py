"""What a run of a program showed, for passes that use more than syntax."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

import libcst as cst

from shrinkgpu.syntax.code import code_of
from shrinkgpu.syntax.tokens import count_tokens

__all__ = ["CutRecord", "Facts", "LoadRecord", "ParseRecord", "SavedObject", "SizeRecord", "StateRecord",
           "loaded_cost", "loop_facts", "loop_header"]


@dataclass(frozen=True)
class ParseRecord:
    """An ``argparse`` parse seen at run time: where it was called and what it returned."""

    file: str
    line: int
    values: tuple[tuple[str, str | None], ...]  # name -> repr of a literal, None if not one
    known_args: bool = False  # parse_known_args: the call returns (namespace, rest)


@dataclass(frozen=True)
class LoadRecord:
    """A configuration read (``yaml.safe_load(f)``, ``json.load(f)``) seen at run time:
    where the user's code called it and the value it returned, as source text."""

    file: str
    line: int
    function: str  # the loader the run saw (``yaml.safe_load``)
    literal: str


@dataclass(frozen=True)
class SizeRecord:
    """A size the user's failing frame read (``len(vocab.itos)``), as the first error found
    it: in ``function`` (its qualified name, ``<module>`` at the top level) of ``file``;
    ``expression`` as ``ast.unparse`` writes it."""

    file: str
    function: str
    expression: str
    literal: str
    # "number", or "tensor": a name bound to a tensor, ``literal`` a factory of its dtype,
    # shape, strides and device (``torch.randn(64, 4, 128)``), or "setting": a
    # configuration value read through attributes (``cfg.data.n_features`` -> ``14``)
    kind: str = "number"


@dataclass(frozen=True)
class Facts:
    """What a run of this exact program showed, for passes that use more than syntax."""

    stack: tuple[tuple[str, int], ...] = ()  # (file, line) of the first error's user frames, outermost first
    parses: tuple[ParseRecord, ...] = ()
    loads: tuple[LoadRecord, ...] = ()
    # (file, line, innermost) of each user frame on the call chain of a seeding call
    seed_sites: tuple[tuple[str, int, bool], ...] = ()
    # (file, header text, iteration) of the ``for`` loops around the failing line in the
    # original run: by text, since lines move as the program shrinks
    loops: tuple[tuple[str, str, int], ...] = ()
    # The statement where the user's code handed control to a library that called back
    # into a user object, and the text that calls that object directly (passes/library.py)
    cut: "CutRecord | None" = None
    # (file, header text, share of the original's run time) of the loops where most of
    # that time went, when it was long enough to matter (passes/hot.py cuts them first)
    hot_loops: tuple[tuple[str, str, float], ...] = ()
    # The user's data objects the first run saved at its first error (passes/data.py)
    saved_objects: tuple["SavedObject", ...] = ()
    # The state at the start of the failing iteration, saved by one more run of the
    # original and checked to replay the bug (passes/replay.py)
    state: "StateRecord | None" = None
    # The sizes the failing frames read, evaluated at the original's first error
    # (passes/sizes.py): by text, since lines move as the program shrinks
    sizes: tuple[SizeRecord, ...] = ()
    # The rank whose error was the first, in a script that starts its own ranks
    # (passes/ranks.py calls that rank's function directly)
    rank: int | None = None

    @property
    def loaded(self) -> tuple[tuple[str, int], ...]:
        """(file name, cost) of each file a program of these facts may load instead of
        building what it holds: the library's saved call, the data objects.  (The state
        at the failing step is not counted: where the search starts is decided by time,
        and the report says which artifact runs alone.)"""
        out = [(self.cut.loads, self.cut.cost)] if self.cut is not None and self.cut.loads else []
        return tuple(out + [(o.file, loaded_cost(o.size)) for o in self.saved_objects])


@dataclass(frozen=True)
class CutRecord:
    file: str
    source: str  # the statement's text as written (``trainer.fit(model, dm)``)
    replacement: str  # statements that call the object with the saved arguments
    library: str = ""  # what the statement called (``Trainer.fit``)
    # The file ``replacement`` loads the saved call from, and what it carries to the
    # search (``loaded_cost``); "" and 0 when the call is written as source (every
    # argument a literal: the program then loads nothing)
    loads: str = ""
    cost: int = 0
    # The saved call as source with its values drawn afresh (floating-point tensors
    # random of their layout, modules built anew: ``syntax.values``' layout level):
    # (args, keywords, attributes), each keyword and attribute (name, text); what a
    # result that loads ``loads`` is written back as when that still fails the same way.
    # None when a part has no such form.
    layout: "tuple[tuple[str, ...], tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]] | None" = None


# What a file a program loads carries, as the search counts it (on top of the file itself,
# ``syntax.program.FILE_COST``): the tokens of the source it stands for when it has one,
# else one per KiB it holds, up to LOADED_COST_MAX (a dataset of megabytes stands for no
# more code than its constructor; beyond that, bytes say nothing of what a reader reads).
# A pickle of four numbers is never smaller than the four numbers written out.
LOADED_BYTES_PER_COST = 1024
LOADED_COST_MAX = 100


def loaded_cost(nbytes: int, source: str | None = None) -> int:
    if source:
        return count_tokens(source)
    return min(-(-max(int(nbytes), 0) // LOADED_BYTES_PER_COST), LOADED_COST_MAX)


@dataclass(frozen=True)
class SavedObject:
    name: str  # what the user's code called it where it was alive (``train_set``)
    cls: str  # its class's qualified name (``SyntheticKWS``)
    file: str  # the pickle's file name, beside the main script (``kws.train_set.pkl``)
    size: int  # bytes
    directory: str = ""  # the main script's directory within the root ("" at the top)
    # A data helper's result (``train, val, test = build_splits(cfg)``): the names the
    # statement binds, the file holding their values (a tuple for several); ``cls`` is
    # then ``build_splits()``.  Empty for an instance of the user's class.
    targets: tuple[str, ...] = ()


@dataclass(frozen=True)
class StateRecord:
    """The program's state at the start of iteration ``iteration`` of the loop
    ``header`` (its text) in ``file``, in the function ``function`` ("<module>" at the
    top level), saved to ``state_file`` beside the main script."""

    file: str
    header: str
    iteration: int
    function: str
    # (expression, how it is restored): "load" (``load_state_dict``), "value" (assigned),
    # "copy" (a parameter, copied into in place), "torch-generator", "random-generator",
    # "numpy-generator" (a generator object's state set back)
    entries: tuple[tuple[str, str], ...]
    rng: tuple[str, ...]  # the global generators saved: "torch", "cuda", "numpy", "random"
    state_file: str
    directory: str = ""  # the main script's directory within the root ("" at the top)
    # the directory beside ``state_file`` that holds the files the run wrote before that
    # iteration (a checkpoint the training saved), at their paths relative to the
    # working directory; "" when it wrote none
    files_dir: str = ""


def loop_header(node: cst.CSTNode) -> str:
    """The first line of a ``for`` statement as written (comments above it left out)."""
    code = code_of(node.with_changes(leading_lines=())) if hasattr(node, "leading_lines") else code_of(node)
    return code.strip().splitlines()[0].strip() if code.strip() else ""


def loop_facts(files: Mapping[str, str], seen: Iterable[tuple[str, int, int]]) -> tuple[tuple[str, str, int], ...]:
    """(file, header text, iteration) for the (file, line, iteration) a run counted."""
    out = []
    for file, line, iteration in seen:
        lines = files.get(file, "").splitlines()
        if 1 <= line <= len(lines):
            out.append((file, lines[line - 1].strip(), iteration))
    return tuple(out)
