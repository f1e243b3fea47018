"""Program transformations, each a small pass registered in ``PASSES``.

A pass proposes units (``Edit``s) on a candidate, level by level, and builds the
candidate with some of them applied; the core decides which units to apply by testing.
Adding a pass: write a class with ``name``, ``units(cand, level)`` and ``apply`` (the
``EditPass`` base gives ``apply``), register it below, and add a before/after test in
tests/passes/test_<module>.py.  See docs/passes.md.
"""

from shrinkgpu.passes.annotations import StripAnnotations
from shrinkgpu.passes.assignments import SplitAssignments
from shrinkgpu.passes.base import EditPass
from shrinkgpu.passes.batches import FirstBatch
from shrinkgpu.passes.branches import HoistElse, HoistThen, TryToBody, UnwrapWith
from shrinkgpu.passes.compiled import CompiledForward
from shrinkgpu.passes.config_classes import ConfigClassValues
from shrinkgpu.passes.configs import ConfigToLiteral
from shrinkgpu.passes.constants import ArgparseToNamespace, PropagateConstants, ScalarizeAttributes
from shrinkgpu.passes.data import LoadSavedObjects
from shrinkgpu.passes.decorators import StripDecorators
from shrinkgpu.passes.definitions import DeleteDefinitions, PruneImports
from shrinkgpu.passes.expressions import SimplifyExpressions
from shrinkgpu.passes.files import DropFiles, InlineModules
from shrinkgpu.passes.hot import CutHotLoops
from shrinkgpu.passes.inline import InlineBindings, InlineCalls, InlineExpressions
from shrinkgpu.passes.library import CallPastTheLibrary
from shrinkgpu.passes.literals import ShrinkDataLiterals
from shrinkgpu.passes.loops import LoopToFailingIteration, LoopToFirstIteration, WhileToBody
from shrinkgpu.passes.modules import FlattenModule
from shrinkgpu.passes.never_ran import DeleteNeverRan
from shrinkgpu.passes.parameters import DropParameters
from shrinkgpu.passes.ranks import FewestRanks
from shrinkgpu.passes.records import AppendLoopToList, DropEnumerate, SplitRecords
from shrinkgpu.passes.replay import ReplayFromState, put_back_text
from shrinkgpu.passes.sizes import ObservedSizes
from shrinkgpu.passes.statements import DeleteStatements, SliceToFailure

# Tiers, cheapest first (see core.search.reduce_to_fixpoint): the first tier removes
# and restructures whole statements and is swept until it stops making progress; the
# second works on single expressions and only runs on what the first could not shrink.
# Within a tier, large removals come first; order affects speed, not minimality.
STRUCTURE: tuple[EditPass, ...] = (
    # first: while a loop takes most of each run, every other candidate pays for it
    # (before any pass, a long job may start at its failing iteration from the state
    # saved there: ReplayFromState, which the reducer applies once it has checked it)
    CutHotLoops(),
    SliceToFailure(),
    # after the slice: what ran after the failure (``trainer.evaluate()``) reads the
    # trainer too, and would keep it alive
    CallPastTheLibrary(),
    # the arguments that cut writes out (a batch of records as literals) are the largest
    # removals a cut start offers: hundreds of tokens a record, and fast candidates
    ShrinkDataLiterals(),
    ArgparseToNamespace(),
    ConfigToLiteral(),
    # sizes computed from data (``len(vocab)``, ``x.size(1)``) and batches behind a shape
    # error as the run computed them: each unit takes the pipeline that built the data,
    # which is where a long run's candidates spend their time, so before the deletions
    ObservedSizes(),
    DeleteDefinitions(),
    DeleteStatements(),
    HoistThen(),
    HoistElse(),
    TryToBody(),
    UnwrapWith(),
    LoopToFirstIteration(),
    FirstBatch(),
    WhileToBody(),
    DropEnumerate(),
    AppendLoopToList(),
    SplitRecords(),
    PropagateConstants(),
    ScalarizeAttributes(),
    ConfigClassValues(),
    StripDecorators(),
    # typed, grown code: annotations and unused parameters keep definitions and config
    # fields alive; a tuple assignment keeps a dead attribute with a live one
    StripAnnotations(),
    DropParameters(),
    SplitAssignments(),
    # the ranks a script starts itself, fewest or none: before the calls are inlined, so
    # that the failing rank's function, called directly, is inlined like any other
    FewestRanks(),
    # before the calls are inlined: ``torch.compile(model)`` is no call of a local
    # function, so InlineCalls cannot reach the forward it runs
    CompiledForward(),
    # a module class made once becomes its layers and a function of its forward
    FlattenModule(),
    InlineCalls(),
    InlineExpressions(),
    InlineModules(),
    DropFiles(),
    PruneImports(),
)
EXPRESSIONS: tuple[EditPass, ...] = (SimplifyExpressions(), LoopToFailingIteration())
# Inlining single-use bindings comes last, on what neither tier above can shrink: a
# binding is what they look for (``loader = DataLoader(...)``, ``model = Net(...)``).
FINISHING: tuple[EditPass, ...] = (InlineBindings(),)
# Last of all, when nothing above shrinks the program: a data object built from seeded
# draws pins the failing shapes, and loading it lets its constructor go.  Earlier, a
# loaded object would stop the passes that turn a small dataset into a literal or a
# ``torch.randint`` (which shows more than a pickle does).
LOADING: tuple[EditPass, ...] = (LoadSavedObjects(),)
PASSES: tuple[tuple[EditPass, ...], ...] = (STRUCTURE, EXPRESSIONS, FINISHING, LOADING)

__all__ = [
    "EXPRESSIONS",
    "FINISHING",
    "LOADING",
    "PASSES",
    "STRUCTURE",
    "SplitAssignments",
    "StripAnnotations",
    "AppendLoopToList",
    "CallPastTheLibrary",
    "CompiledForward",
    "FewestRanks",
    "FlattenModule",
    "ArgparseToNamespace",
    "ConfigToLiteral",
    "CutHotLoops",
    "PropagateConstants",
    "PruneImports",
    "DeleteDefinitions",
    "DeleteNeverRan",
    "DeleteStatements",
    "DropEnumerate",
    "DropParameters",
    "DropFiles",
    "FirstBatch",
    "EditPass",
    "HoistElse",
    "HoistThen",
    "InlineBindings",
    "InlineCalls",
    "InlineExpressions",
    "InlineModules",
    "LoadSavedObjects",
    "LoopToFailingIteration",
    "LoopToFirstIteration",
    "ObservedSizes",
    "ReplayFromState",
    "put_back_text",
    "WhileToBody",
    "ShrinkDataLiterals",
    "SliceToFailure",
    "SplitRecords",
    "StripDecorators",
    "TryToBody",
    "ScalarizeAttributes",
    "ConfigClassValues",
    "SimplifyExpressions",
    "UnwrapWith",
]
