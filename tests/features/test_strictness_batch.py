"""--strictness batch end to end: the rows of input and target shrink together, the
classes do not."""

from __future__ import annotations

import textwrap

from shrinkgpu.reducer import ReduceConfig, reduce
from shrinkgpu.signature import Strictness

SCRIPT = textwrap.dedent("""\
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    rows = 64
    logits = torch.randn(rows, 3)
    target = torch.arange(rows) % 4
    F.cross_entropy(logits, target)
    """)


def _reduce(tmp_path, strictness):
    work = tmp_path / strictness.value
    work.mkdir()
    (work / "s.py").write_text(SCRIPT)
    return reduce(ReduceConfig(script=work / "s.py", cwd=work, keep_error="out of bounds", strictness=strictness,
                               jobs=2, confirm=0, verify_runs=1, extract=False))


def test_batch_lets_the_shared_rows_shrink_and_strict_keeps_them(tmp_path):
    strict = _reduce(tmp_path, Strictness.STRICT)
    assert [t.shape for t in strict.final_signature.op.tensors] == [(64, 3), (64,)]
    batch = _reduce(tmp_path, Strictness.BATCH)
    shapes = [t.shape for t in batch.final_signature.op.tensors]
    # the smallest batch that still holds a 3 among the targets: four rows
    assert shapes == [(4, 3), (4,)], batch.output.read_text()
    assert batch.tokens_after <= strict.tokens_after
