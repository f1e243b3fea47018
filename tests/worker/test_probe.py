"""What a run records for passes beyond syntax: configuration reads (config-to-literal),
where the time went by loop (cut-hot-loops), and where a library called back into the
user's code (cut-library).  Real worker processes, real torch."""

from __future__ import annotations

import os
import pickle
import textwrap
from pathlib import Path

import pytest

from shrinkgpu.worker import Isolation, Runner, ScriptSpec, Watch

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/root"),
       "DATA_ROOT": "/srv/datasets/har"}


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    root = tmp_path_factory.mktemp("facts")
    (root / "s.py").write_text("pass\n")
    (root / "config.yaml").write_text("model:\n  in_channels: 3\n  hidden: [32, 64]\nseed: 1\n")
    (root / "config.json").write_text('{"lr": 0.1, "root": "/srv/datasets/har"}')
    spec = ScriptSpec(script=root / "s.py", cwd=root, env=ENV)
    with Runner(spec, isolation=Isolation.FORK) as r:
        r.start(["torch", "yaml", "json"])
        yield r


def run(runner, text: str, **watch):
    return runner.run({"s.py": textwrap.dedent(text)}, timeout=60, watch=Watch(**watch))


def test_config_reads_are_recorded_as_literals_where_the_users_code_made_them(runner):
    pytest.importorskip("yaml")
    obs = run(runner, """\
        import json, yaml
        with open("config.yaml") as f:
            cfg = yaml.safe_load(f)
        cfg["seed"] = 2                      # changed after the read: the record is the read
        opt = json.load(open("config.json"))
        for text in ("1", "2"):
            json.loads(text)                 # two values at one place: no literal
        """)
    loads = {(r["line"], r["function"]): r["literal"] for r in obs.loads}
    assert loads[(3, "yaml.safe_load")] == "{'model': {'in_channels': 3, 'hidden': [32, 64]}, 'seed': 1}"
    # a value from the environment stays a read of it
    assert loads[(5, "json.load")] == "{'lr': 0.1, 'root': __import__(\"os\").environ['DATA_ROOT']}"
    assert loads[(7, "json.loads")] is None


def test_a_librarys_own_reads_are_not_the_scripts_configuration(runner):
    obs = run(runner, """\
        import json, torch
        def helper_in_user_code(s):
            return json.loads(s)
        torch.nn.Linear(2, 2)
        x = helper_in_user_code('{"a": 1}')
        """)
    # the user's helper is the caller: recorded at the helper's line, once
    assert [(r["line"], r["literal"]) for r in obs.loads] == [(3, "{'a': 1}")]


HOT = """\
import time
import torch
for step in range(40):          # where the time goes
    time.sleep(0.01)
for i in range(3):
    pass
torch.nn.functional.embedding(torch.tensor([5]), torch.randn(4, 2))
"""


def test_the_first_run_samples_where_the_time_goes_by_loop(runner):
    obs = run(runner, HOT, count_loops=True)
    shares = {line: share for file, line, share in obs.loop_time if file == "s.py"}
    assert shares.get(3, 0) > 0.5
    assert shares.get(5, 0) < 0.1
    # only runs that count loops pay for the sampler
    assert run(runner, HOT).loop_time == ()


def test_a_decorator_around_the_users_own_method_is_no_library_to_cut(runner, tmp_path):
    obs = run(runner, """\
        import torch
        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = torch.nn.Embedding(4, 2)
            def forward(self, i):
                return self.emb(i)
            @torch.no_grad()
            def generate(self, i):
                for _ in range(3):
                    self(i)
                    i = i + 1
        model = Net()
        model.generate(torch.tensor([2]))
        """, cut=str(tmp_path / "call.pt"))
    assert obs.signature.type == "IndexError"
    assert obs.cut is None
    assert not (tmp_path / "call.pt").exists()


def test_a_library_that_calls_back_into_the_users_object_is_cut(runner, tmp_path):
    obs = run(runner, """\
        import torch
        from torch.utils.data import DataLoader
        class Rows(torch.utils.data.Dataset):
            def __len__(self):
                return 4
            def __getitem__(self, i):
                return torch.nn.functional.embedding(torch.tensor([i + 2]), torch.randn(4, 2))
        rows = Rows()
        for batch in DataLoader(rows, batch_size=2):
            pass
        """, cut=str(tmp_path / "call.pt"))
    assert obs.signature.type == "IndexError"
    assert obs.cut is not None and obs.cut["object"] == "rows" and obs.cut["method"] == "__getitem__"
    assert Path(tmp_path / "call.pt").is_file()


def test_a_function_the_user_handed_to_the_library_is_cut_with_all_its_arguments(runner, tmp_path):
    obs = run(runner, """\
        import torch
        from torch.utils.data import DataLoader
        def pad(rows):
            return rows
        def collate(rows):
            return torch.stack(pad(rows))
        rows = [torch.zeros(3)] * 5 + [torch.zeros(2)]
        for epoch in range(2):
            for batch in DataLoader(rows, batch_size=3, collate_fn=collate):
                pass
        """, cut=str(tmp_path / "call.pt"))
    assert obs.signature.type == "RuntimeError"
    # the function the loader called, not the deeper one it called itself
    assert obs.cut is not None and obs.cut["object"] == "collate" and obs.cut["method"] is None
    assert obs.cut["source"] == "for batch in DataLoader(rows, batch_size=3, collate_fn=collate):"
    import torch

    saved = torch.load(tmp_path / "call.pt", weights_only=False)
    assert [[r.shape[0] for r in rows] for rows in saved["args"]] == [[3, 3, 2]] and saved["kwargs"] == {}

def test_a_parsed_path_into_the_runs_own_copy_is_written_relative_to_the_working_directory(runner):
    obs = run(runner, """\
        import argparse, os
        ap = argparse.ArgumentParser()
        ap.add_argument("--config", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "config.yaml"))
        ap.add_argument("--out", default="/definitely/elsewhere/out")
        args = ap.parse_args([])
        """)
    [parse] = obs.parses
    assert parse["values"] == {"config": "'config.yaml'", "out": "'/definitely/elsewhere/out'"}


def test_the_users_data_objects_alive_at_the_error_are_saved_and_models_and_configs_are_not(runner, tmp_path):
    obs = run(runner, """\
        import numpy as np
        import torch
        class Config:
            def __init__(self):
                self.lr, self.sizes = 0.1, [1, 2]
        class Clouds(torch.utils.data.Dataset):
            def __init__(self, n, seed):
                rng = np.random.default_rng(seed)
                self.clouds = [rng.normal(size=(int(rng.integers(3, 9)), 3)) for _ in range(n)]
        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.rows = list(range(20))
                self.lin = torch.nn.Linear(3, 2)
        class Holder:
            def __init__(self):
                self.rows = list(range(20))
                self.fn = lambda x: x
        def main():
            cfg, net, held = Config(), Net(), Holder()
            train = Clouds(20, seed=1)
            torch.cat([torch.from_numpy(c) for c in train.clouds]).view(-1, 4)
        main()
        """, save_objects=str(tmp_path / "objects"))
    assert obs.signature.type == "RuntimeError"
    # the config holds no data, the model is configuration, the lambda cannot be pickled
    assert [(o["name"], o["class"]) for o in obs.saved_objects] == [("train", "Clouds")]
    saved = obs.saved_objects[0]
    assert Path(saved["path"]).stat().st_size == saved["bytes"]
    # a class of ``__main__``, referred to by name: the result that loads it defines it
    data = Path(saved["path"]).read_bytes()
    assert b"__main__" in data and b"Clouds" in data and b"clouds" in data


def test_the_librarys_own_function_that_a_users_object_holds_is_cut_there(runner, tmp_path):
    # the loader's default collate function stacks rows of two lengths: it is reached as
    # ``loader.collate_fn``, and its argument is the batch of rows
    obs = run(runner, """\
        import torch
        from torch.utils.data import DataLoader
        rows = [torch.zeros(3)] * 5 + [torch.zeros(2)]
        loader = DataLoader(rows, batch_size=3)
        for batch in loader:
            pass
        """, cut=str(tmp_path / "call.pt"))
    assert obs.signature.type == "RuntimeError"
    assert obs.cut is not None and obs.cut["object"] == "loader.collate_fn" and obs.cut["method"] is None
    import torch

    saved = torch.load(tmp_path / "call.pt", weights_only=False)
    assert [[r.shape[0] for r in rows] for rows in saved["args"]] == [[3, 3, 2]]


def test_an_object_holding_one_large_array_is_saved_whole(runner, tmp_path):
    # pickle's protocol 5 writes a large array's memory as a PickleBuffer, not bytes
    obs = run(runner, """\
        import numpy as np
        class Points:
            def __init__(self, n):
                self.x = np.random.default_rng(3).normal(size=(n, 4)).astype(np.float32)
        points = Points(4096)
        points.x[4096]
        """, save_objects=str(tmp_path / "objects"))
    assert obs.signature.type == "IndexError"
    [saved] = obs.saved_objects
    assert (saved["name"], saved["class"]) == ("points", "Points")
    assert Path(saved["path"]).stat().st_size == saved["bytes"] > 4096 * 4 * 4


def test_what_the_users_data_helpers_returned_is_saved_when_the_run_was_long_enough(runner, tmp_path):
    src = """\
        import pickle
        import random
        import torch
        def build(n):
            rng = random.Random(1)
            rows = [(str(rng.random()), [1, 2]) for _ in range(n)]
            return rows[:n // 2], rows[n // 2:], torch.arange(n)
        def make_model():
            return torch.nn.Linear(2, 2)
        def main():
            train, test, ids = build(40)
            model = make_model()                # a module: configuration, not data
            short = build(4)                    # a tuple of three: one name, no data of its own
            pairs = dict(zip(range(3), "abc"))  # not a helper of the user's
            ids[40]
        main()
        """
    obs = run(runner, src, save_objects=str(tmp_path / "objects"), save_results_after=0.0)
    assert obs.signature.type == "IndexError"
    [saved] = obs.saved_objects
    assert (saved["name"], saved["targets"], saved["class"]) == ("train", ["train", "test", "ids"], "build()")
    train, test, ids = pickle.loads(Path(saved["path"]).read_bytes())
    assert len(train) == len(test) == 20 and ids.tolist() == list(range(40))
    # a run that failed sooner than asked saves no helper's result
    obs = run(runner, src, save_objects=str(tmp_path / "objects-2"), save_results_after=60.0)
    assert obs.signature.type == "IndexError" and obs.saved_objects == ()


def test_no_object_is_saved_unless_asked(runner):
    obs = run(runner, """\
        class Rows:
            def __init__(self):
                self.rows = list(range(20))
        rows = Rows()
        rows.rows[20]
        """)
    assert obs.signature.type == "IndexError" and obs.saved_objects == ()


def test_the_files_a_run_wrote_are_copied_at_their_paths_and_nothing_else(tmp_path):
    from shrinkgpu.worker.probe.state import file_stamps, save_written_files

    work = tmp_path / "work"
    (work / "data").mkdir(parents=True)
    (work / "data" / "train.csv").write_text("a,b\n")
    (work / "old.pt").write_bytes(b"0" * 10)
    before = file_stamps(str(work))
    (work / "runs").mkdir()
    (work / "runs" / "best.pt").write_bytes(b"1" * 20)
    (work / "old.pt").write_bytes(b"2" * 11)  # rewritten by the run: its new bytes count
    (work / "__pycache__").mkdir()
    (work / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"x")
    saved = save_written_files(before, str(tmp_path / "state.pt.files"), top=str(work))
    assert saved == {"files": ["old.pt", "runs/best.pt"], "files_bytes": 31}
    assert (tmp_path / "state.pt.files" / "runs" / "best.pt").read_bytes() == b"1" * 20
    assert not (tmp_path / "state.pt.files" / "data").exists()
    assert save_written_files(file_stamps(str(work)), str(tmp_path / "none"), top=str(work)) == {"files": []}


def test_a_librarys_method_that_calls_back_into_the_users_override_is_cut_at_the_override(runner, tmp_path):
    # (the HF Trainer's compute_loss, a Keras-style train_step: here a scheduler's get_lr)
    obs = run(runner, """\
        import torch
        class Warmup(torch.optim.lr_scheduler.LRScheduler):
            def get_lr(self):
                table = torch.zeros(4, 2)
                return [float(torch.nn.functional.embedding(torch.tensor([self.last_epoch]), table).sum()) + 0.1]
        opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
        sched = Warmup(opt)
        for _ in range(5):
            sched.step()
        """, cut=str(tmp_path / "call.pt"))
    assert obs.signature.type == "IndexError"
    assert obs.cut is not None and (obs.cut["object"], obs.cut["method"]) == ("sched", "get_lr")
    assert obs.cut["source"] == "sched.step()"
    # what the library's loop set on the user's object is saved with the call (a fresh
    # scheduler would start at epoch 0); the optimizer it holds is no plain data
    assert "last_epoch" in obs.cut["attributes"] and "optimizer" not in obs.cut["attributes"]
    import torch

    assert torch.load(tmp_path / "call.pt", weights_only=False)["attributes"]["last_epoch"] == 4


def test_the_cut_calls_the_users_function_with_its_arguments_as_they_came_in(runner, tmp_path):
    # At the failure ``rows`` is a tensor and ``batch`` has lost its labels; the call
    # made directly needs what the library passed (the HF Trainer's ``compute_loss``
    # pops its labels the same way).
    obs = run(runner, """\
        import functools
        import torch
        from torch.utils.data import DataLoader
        def collate(rows, **options):
            rows = torch.stack(rows)
            options.pop("table")
            return torch.nn.functional.embedding(rows, torch.randn(4, 2))
        loader = DataLoader([torch.tensor([i]) for i in range(6)], batch_size=3,
                            collate_fn=functools.partial(collate, table=1))
        for batch in loader:
            pass
        """, cut=str(tmp_path / "call.pt"), count_loops=True)
    assert obs.signature.type == "IndexError"
    assert obs.cut is not None and obs.cut["object"] == "collate"
    import torch

    saved = torch.load(tmp_path / "call.pt", weights_only=False)
    assert [t.tolist() for t in saved["args"][0]] == [[3], [4], [5]]
    assert saved["kwargs"] == {"table": 1}


def test_loops_are_counted_in_the_users_modules_with_no_tracer_on(runner):
    files = {
        "s.py": "import sys\nimport helper\ntracer = sys.gettrace()\nfor epoch in range(4):\n"
                "    helper.walk(epoch, tracer)\n",
        "helper.py": '"""Walks."""\nfrom __future__ import annotations\n\n\ndef walk(epoch, tracer):\n'
                     '    """Walks once."""\n    for i in range(3):\n        if epoch == 2 and i == 1:\n'
                     '            raise RuntimeError(f"{tracer} {__doc__} {walk.__doc__}")\n',
    }
    obs = runner.run(files, timeout=60, watch=Watch(count_loops=True))
    # no tracer slows the run; docstrings and the __future__ import are where they were
    assert obs.signature.message == "None Walks. Walks once."
    assert obs.loops == (("helper.py", 7, 1), ("s.py", 4, 2))
    assert obs.loop_calls == (("helper.py", 7, 3), ("s.py", 4, 1))  # walk's third call


def test_a_loop_torch_compile_traces_is_counted_without_a_graph_break(runner, tmp_path):
    # Dynamo traces the counting calls of ``forward``'s loop; they must not break a
    # ``fullgraph`` compile (that would be another first error than the user's)
    obs = run(runner, """\
        import torch
        class Block(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(3))
            def forward(self, x):
                for layer in self.layers:
                    x = layer(x)
                return x
        model = torch.compile(Block(), fullgraph=True, backend="eager")
        for step in range(3):
            y = model(torch.ones(2, 4))
            if step == 2:
                y.view(3)
        """, count_loops=True, cut=str(tmp_path / "call.pt"))  # (the first run's: arguments kept too)
    assert (obs.signature.type, obs.signature.op.name) == ("RuntimeError", "Tensor.view")
    assert obs.loops == (("s.py", 11, 2),)


def test_the_counting_calls_sit_at_each_loops_body_and_each_scope_that_holds_one():
    # (never in a function numba compiles from its bytecode: it could not type the call)
    import ast

    from shrinkgpu.worker.probe.loops import ENTER, START, TICK, _Instrument

    tree = _Instrument().visit(ast.parse(textwrap.dedent('''\
        """doc"""
        from __future__ import annotations
        def plain(x):
            return x
        class C:
            for k in range(2):
                pass
            def f(self, rows):
                """f's doc"""
                for r in rows:
                    for c in r:
                        pass
                return [c for c in rows]
        @numba.njit(cache=True)
        def compiled_from_its_bytecode(n):
            for i in range(n):
                pass
        ''')))
    assert ast.unparse(tree) == textwrap.dedent(f'''\
        """doc"""
        from __future__ import annotations

        def plain(x):
            return x

        class C:
            {ENTER}()
            {START}(6)
            for k in range(2):
                {TICK}(6)
                pass

            def f(self, rows):
                """f's doc"""
                {ENTER}()
                {START}(10)
                for r in rows:
                    {TICK}(10)
                    {START}(11)
                    for c in r:
                        {TICK}(11)
                        pass
                return [c for c in rows]

        @numba.njit(cache=True)
        def compiled_from_its_bytecode(n):
            for i in range(n):
                pass''')


def test_with_arguments_each_function_keeps_what_it_was_called_with_after_its_docstring():
    import ast

    from shrinkgpu.worker.probe.loops import ARGUMENTS, ARGUMENTS_LOCAL, LoopCounter, _Instrument, entry_arguments, instrumented

    source = textwrap.dedent('''\
        def step(self, batch, /, scale=2, *rest, labels=None, **options):
            """doc"""
            batch = batch.copy()
            return batch
        def none():
            return 1
        def listed(a, b):
            return dict(locals())
        ''')
    tree = _Instrument(arguments=True).visit(ast.parse(source))
    # (a function that lists its locals is left as written: ours would be among them)
    assert "def listed(a, b):\n    return dict(locals())" in ast.unparse(tree)
    assert ast.unparse(tree).splitlines()[:3] == [
        "def step(self, batch, /, scale=2, *rest, labels=None, **options):",
        '    """doc"""',
        f"    {ARGUMENTS_LOCAL} = {ARGUMENTS}(('self', 'batch', 'scale', 'labels', 'rest', 'options'), "
        "self, batch, scale, labels, rest, options)",
    ]
    assert "def none():\n    return 1" in ast.unparse(tree)
    # what it keeps: a dict emptied in place and a rebound name as they came in
    import sys

    code, _ = instrumented(textwrap.dedent('''\
        import sys
        def emptied(inputs, x):
            inputs.pop("labels")
            x = x + 1
            return sys._getframe()
        '''), "<test>", arguments=True)
    scope = {ARGUMENTS: LoopCounter((), arguments=True).keep_arguments}
    exec(code, scope)
    frame = scope["emptied"]({"labels": 3, "ids": 1}, 1)
    assert entry_arguments(frame) == {"inputs": {"labels": 3, "ids": 1}, "x": 1}
    assert entry_arguments(sys._getframe()) == {}


def test_the_sizes_the_failing_frames_read_are_evaluated_at_the_first_error(runner):
    obs = run(runner, """\
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
    obs = run(runner, """\
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
    obs = run(runner, """\
        xs = [1, 2]
        xs[len(xs)]
        """)
    assert obs.signature.type == "IndexError" and obs.sizes == ()


def test_the_tensors_the_failing_frames_bound_are_recorded_as_factories_of_their_layout(runner):
    obs = run(runner, """\
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


def test_the_autocast_a_library_entered_around_the_users_code_is_kept_with_the_cut(runner, tmp_path):
    # torch.autocast as a decorator stands for a framework's mixed precision (Lightning's
    # bf16-mixed): the user's function fails only under it, and the with has exited by
    # the time the error reaches the probe
    obs = run(runner, """\
        import torch
        def step(table, idx):
            out = torch.zeros(4, 4)
            out[idx] = table @ table
        step_amp = torch.autocast("cpu", dtype=torch.bfloat16)(step)
        step_amp(torch.randn(4, 4), torch.arange(4))
        """, cut=str(tmp_path / "call.pt"))
    assert obs.signature.message.startswith("Index put requires the source and destination dtypes match")
    assert obs.cut is not None and obs.cut["autocast"] == [["cpu", "torch.bfloat16"]]
    without = run(runner, """\
        import torch
        def step(table, idx):
            torch.zeros(4, 4).index_select(0, idx + 4)
        torch.no_grad()(step)(torch.randn(4, 4), torch.arange(4))
        """, cut=str(tmp_path / "call2.pt"))
    assert without.cut is not None and without.cut["autocast"] == []


def test_a_file_the_run_makes_itself_is_not_data_it_reads(runner):
    obs = run(runner, """\
        import os
        import torch
        os.makedirs("runs/ckpt", exist_ok=True)
        torch.save({"w": torch.ones(2)}, "runs/ckpt/model.pt")
        state = torch.load("runs/ckpt/model.pt")
        with open("log.txt", "a") as f:
            f.write("x")
        open("log.txt").read()
        open("config.json").read()
        raise SystemExit(3)
        """)
    # the checkpoint it saved and loaded, the log it appended to a file not there before:
    # its own; the configuration it only read is what a result needs beside it
    assert set(obs.reads) == {"config.json", "s.py"}  # (the script: read for its traceback)
