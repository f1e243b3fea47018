"""probe/sizes.py with real processes: the sizes, settings and tensors the failing
frames read, evaluated at the first error; nothing unless asked.
"""

from __future__ import annotations

from worker.probe.helpers import watched


def test_the_sizes_the_failing_frames_read_are_evaluated_at_the_first_error(runner):
    obs = watched(runner, """\
        import torch
        class Vocab:
            def __init__(self, words):
                self.itos = ["<pad>"] + sorted(set(words))
            def __len__(self):
                return len(self.itos)
        def build(n, vocab, max_len):
            return torch.nn.Embedding(n, 4), torch.zeros(max_len, 4)
        def main():
            vocab = Vocab("a b c d a".split())
            x = torch.zeros(3, 7, dtype=torch.long)
            max_len = x.size(1)
            emb, pos = build(len(vocab.itos), vocab, max_len)
            words = [len(w) for w in vocab.itos]          # another scope: not evaluated
            shape = x.shape
            emb(x + len(vocab)) + pos[:x.shape[-1]]
        main()
        """, sizes=True)
    assert obs.signature.type == "IndexError"
    got = {(s["function"], s["expression"]): s["literal"] for s in obs.sizes}
    assert got == {
        ("main", "x.size(1)"): "7",
        ("main", "len(vocab.itos)"): "5",
        ("main", "x.shape"): "(3, 7)",
        ("main", "len(vocab)"): "5",
        ("main", "x.shape[-1]"): "7",
        # the names bound once to something else than a literal, as the frame holds them
        # (``vocab`` and ``emb`` are neither numbers nor plain tensors)
        ("main", "max_len"): "7",
        ("main", "shape"): "(3, 7)",
        ("main", "x"): "torch.zeros(3, 7, dtype=torch.int64)",
        ("main", "pos"): "torch.randn(7, 4)",
    }
    assert {s["file"] for s in obs.sizes} == {"s.py"}


def test_the_configuration_values_the_failing_frames_read_are_recorded_as_literals(runner):
    obs = watched(runner, """\
        import argparse
        from dataclasses import dataclass
        import torch
        @dataclass
        class Data:
            n_features: int = 14
            name: str = "alloy"
        @dataclass
        class Config:
            data: Data
            lr: float = 0.01
        class Vocab:
            pad, eos = 0, 2
            def __init__(self):
                self.itos = ["<pad>", "a"]
            @property
            def size(self):
                return len(self.itos)
        class Holder:
            def __init__(self):
                self.n, self.w = 3, torch.zeros(2)
        def main():
            args = argparse.Namespace(hidden=8, resume=None, amp=True)
            cfg, vocab, held = Config(Data()), Vocab(), Holder()
            net = torch.nn.Linear(cfg.data.n_features, args.hidden)
            args.hidden = 9                       # assigned in the scope: not a value of the read's
            lr, flag, end = cfg.lr, args.amp, (vocab.eos, vocab.size, held.n, net.in_features)
            x = torch.zeros(2, 3, dtype=torch.float32)
            print(cfg.data.name, args.resume)
            net(x)
        main()
        """, sizes=True)
    assert obs.signature.type == "RuntimeError"
    got = {s["expression"]: s["literal"] for s in obs.sizes if s["kind"] == "setting"}
    # a dataclass's, a namespace's, a class attribute of the user's plain class; not a
    # property (code), an object holding a tensor, a module's, an attribute of ``torch``,
    # one the scope assigns, nor a string (a token or a path could be private)
    assert got == {
        "cfg.data.n_features": "14", "cfg.lr": "0.01", "args.amp": "True", "vocab.eos": "2", "args.resume": "None",
    }


def test_no_size_is_evaluated_unless_asked(runner):
    obs = watched(runner, """\
        xs = [1, 2]
        xs[len(xs)]
        """)
    assert obs.signature.type == "IndexError" and obs.sizes == ()


def test_the_tensors_the_failing_frames_bound_are_recorded_as_factories_of_their_layout(runner):
    obs = watched(runner, """\
        import numpy as np
        import torch
        def main():
            table = np.arange(4 * 128 * 64, dtype=np.float32).reshape(64, 4, 128)
            step, (x, y) = 0, (torch.from_numpy(table), torch.from_numpy(np.zeros(64, dtype=np.int64)))
            xt = torch.randn(96, 32).t()
            w = torch.nn.Parameter(torch.randn(3, 5, 5))
            for k, batch in enumerate([torch.zeros(2, 5, 8), x]):
                torch.nn.functional.conv1d(batch, w)
        main()
        """, sizes=True)
    assert obs.signature.type == "RuntimeError"
    got = {s["expression"]: (s["literal"], s["kind"]) for s in obs.sizes if s["function"] == "main"}
    assert got == {
        "step": ("0", "number"),
        "x": ("torch.randn(64, 4, 128)", "tensor"),
        "y": ("torch.zeros(64, dtype=torch.int64)", "tensor"),
        "xt": ("torch.randn(96, 32).t()", "tensor"),
        # a loop's targets: the failing iteration's item
        "k": ("1", "number"),
        "batch": ("torch.randn(64, 4, 128)", "tensor"),
        # ``table`` is an array, not a tensor; ``w`` a parameter: the model's, not data
    }
