"""End to end: sizes computed from data become the numbers the run computed
(passes/sizes.py, probe/sizes.py), and the pipeline that computed them goes.  Real
workers, real torch."""

from __future__ import annotations

import os
import textwrap

import pytest

from conftest import tree_digest
from shrinkgpu.reducer import ReduceConfig, reduce

VOCAB = textwrap.dedent("""\
    import random

    import torch


    def make_corpus(n, seed=0):
        rng = random.Random(seed)
        words = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran"]
        return [" ".join(rng.choice(words) for _ in range(rng.randint(3, 9))) for _ in range(n)]


    def main():
        corpus = make_corpus(5000)
        vocab = sorted({w for line in corpus for w in line.split()})
        stoi = {w: i for i, w in enumerate(vocab)}
        ids = [[stoi[w] for w in line.split()] for line in corpus]
        max_len = max(len(x) for x in ids)
        pos = torch.nn.Embedding(max_len, len(vocab))
        # off by one: positions run to max_len inclusive
        print(pos(torch.arange(1, max_len + 1)).shape)


    if __name__ == "__main__":
        main()
    """)


@pytest.mark.slow
def test_the_sizes_a_corpus_gave_the_model_are_written_as_numbers_and_the_corpus_goes(tmp_path):
    work = tmp_path / "job"
    work.mkdir()
    script = work / "vocab_pos.py"
    script.write_text(VOCAB)
    before = tree_digest(work)
    out = tmp_path / "out" / "vocab_pos.min.py"
    result = reduce(ReduceConfig(script=script, keep_error="index out of range", output=out, verify_runs=1,
                                 confirm=0, jobs=1, ablate=False, env={**os.environ}))
    # the table's rows are the longest line's length (9) and its columns the vocabulary's
    # size (8), as the run computed them; without them, the corpus, the vocabulary and
    # the encoding all stayed (162 of 199 tokens)
    assert out.read_text() == "import torch\ntorch.nn.Embedding(9, 8)(torch.arange(1, 10)).shape\n"
    assert result.verified == (1, 1)
    assert tree_digest(work) == before
