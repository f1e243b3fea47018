"""End to end: sizes computed from data become the numbers the run computed, and a
batch behind a shape error a tensor of its layout (passes/sizes.py, probe/sizes.py); the
pipeline that computed them goes.  Real workers, real torch."""

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


HAR = textwrap.dedent("""\
    import numpy as np
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    SENSORS = ["acc_x", "acc_y", "acc_z", "gyro_norm"]


    def windows(signal, width=128, hop=32):
        return np.stack([signal[:, s:s + width] for s in range(0, signal.shape[1] - width, hop)])


    def load_recordings(n, seed=0):
        rng = np.random.default_rng(seed)
        xs, ys = [], []
        for _ in range(n):
            sig = rng.normal(size=(len(SENSORS), 600)).astype(np.float32)
            w = windows(sig)
            xs.append(w)
            ys.append(np.full(len(w), rng.integers(0, 6)))
        return np.concatenate(xs), np.concatenate(ys)


    def main():
        x, y = load_recordings(40)
        loader = DataLoader(TensorDataset(torch.from_numpy(x), torch.from_numpy(y)), batch_size=64, shuffle=True)
        conv = torch.nn.Conv1d(3, 32, 5, padding=2)  # three accelerometer axes
        head = torch.nn.Linear(32, 6)
        for xb, yb in loader:
            h = conv(xb).mean(-1)
            loss = torch.nn.functional.cross_entropy(head(h), yb)
            loss.backward()


    main()
    """)


@pytest.mark.slow
def test_the_batch_behind_a_shape_error_is_drawn_afresh_with_its_layout_and_the_data_goes(tmp_path):
    script = tmp_path / "har.py"
    script.write_text(HAR)
    out = tmp_path / "out" / "har.min.py"
    result = reduce(ReduceConfig(script=script, keep_error="channels", output=out, verify_runs=1, confirm=0, jobs=1,
                                 ablate=False, env={**os.environ}))
    # the recordings, the windows and the loader gave the convolution a batch of 64
    # windows of 4 sensors by 128 samples: that batch's layout is the bug (before: 102 of
    # 303 tokens, the recording and its windowing kept)
    assert out.read_text() == "import torch\ntorch.nn.Conv1d(3, 32, 5)(torch.randn(64, 4, 128))\n"
    assert result.verified == (1, 1)
