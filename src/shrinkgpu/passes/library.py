"""Cut the library out of the stack.

When the failing code was called by a library (a Lightning hook, a model's ``forward``
through the HF ``Trainer``, a callback), the program keeps the whole framework:
``trainer.fit(model, dm)`` is what reaches the bug.  The original's first run saved the
call the library made into the user's object, and where the user's code handed control
to the library (``probe.library_cut``).  This pass offers one candidate: that statement
replaced by the direct call, ``model.training_step(*saved_args)``.  If it fails with the
same first error, deletion goes on without the framework (the trainer, the data module,
the callbacks are dead once nothing calls them).
"""

from __future__ import annotations

from shrinkgpu.passes.base import LevelZeroPass, Unit, names_read
from shrinkgpu.syntax.code import code_of
from shrinkgpu.syntax.edits import Edit
from shrinkgpu.syntax.program import Candidate
from shrinkgpu.syntax.queries import binds_an_item_of


class CallPastTheLibrary(LevelZeroPass):
    """``trainer.fit(model, dm)`` -> ``model.training_step(*saved_call)``; ``for batch in
    loader: ...`` -> ``collate(*saved_call)``."""

    name = "cut-library"

    def edits(self, cand: Candidate) -> list[Unit]:
        program = cand.program
        cut = program.facts.cut
        if cut is None:
            return []
        live = cand.live
        for s in program.stmts:
            # A loop's header hands control to the library too: ``for batch in loader:``
            # calls the loader, which calls the user's dataset or collate function; the
            # iteration that failed never reached the body, and the loop goes whole.
            if s.file != cut.file or s.id not in live or s.kind not in ("simple", "for"):
                continue
            first_line = code_of(s.node.with_changes(leading_lines=())).strip().splitlines()
            if not first_line:
                continue
            # A loop cut to one pass before this pass came (a hot loop goes first) keeps
            # the library's call in the line that binds its item: ``batch =
            # next(iter(loader))`` is that statement now.
            if first_line[0].strip() != cut.source and not (
                    s.kind == "simple" and binds_an_item_of(cut.source, first_line[0])):
                continue
            # What only that statement read goes in the same unit (the trainer, the data
            # module, their callbacks): without it the unit would grow the program and
            # never be tried; with it, the test says whether their side effects mattered.
            # A framework object may seed on construction (``Trainer.__init__`` calls
            # ``set_seed``), which protects its statement from deletion; here the saved
            # call carries the data it drew, and the oracle's confirm run catches a
            # candidate that still needed the seed.
            replaced = frozenset(range(s.id, program.last[s.id] + 1))
            unread = program.deps.dead_binders(cand, replaced, names_read(cut.replacement), pure_only=False)
            top = sorted(u for u in unread if program.stmts[u].parent not in unread)
            return [(Edit("replace", s.id, text=cut.replacement), *(Edit("delete", u) for u in top))]
        return []
