"""probe/library_cut.py with real processes: where the user's code handed control to a
library that called back into the user's object, and the call to make there instead.
"""

from __future__ import annotations

from pathlib import Path

from worker.probe.helpers import watched


def test_a_decorator_around_the_users_own_method_is_no_library_to_cut(runner, tmp_path):
    obs = watched(runner, """\
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
    obs = watched(runner, """\
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
    obs = watched(runner, """\
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


def test_the_librarys_own_function_that_a_users_object_holds_is_cut_there(runner, tmp_path):
    # the loader's default collate function stacks rows of two lengths: it is reached as
    # ``loader.collate_fn``, and its argument is the batch of rows
    obs = watched(runner, """\
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


def test_a_librarys_method_that_calls_back_into_the_users_override_is_cut_at_the_override(runner, tmp_path):
    # (the HF Trainer's compute_loss, a Keras-style train_step: here a scheduler's get_lr)
    obs = watched(runner, """\
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
    obs = watched(runner, """\
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


def test_the_autocast_a_library_entered_around_the_users_code_is_kept_with_the_cut(runner, tmp_path):
    # torch.autocast as a decorator stands for a framework's mixed precision (Lightning's
    # bf16-mixed): the user's function fails only under it, and the with has exited by
    # the time the error reaches the probe
    obs = watched(runner, """\
        import torch
        def step(table, idx):
            out = torch.zeros(4, 4)
            out[idx] = table @ table
        step_amp = torch.autocast("cpu", dtype=torch.bfloat16)(step)
        step_amp(torch.randn(4, 4), torch.arange(4))
        """, cut=str(tmp_path / "call.pt"))
    assert obs.signature.message.startswith("Index put requires the source and destination dtypes match")
    assert obs.cut is not None and obs.cut["autocast"] == [["cpu", "torch.bfloat16"]]
    without = watched(runner, """\
        import torch
        def step(table, idx):
            torch.zeros(4, 4).index_select(0, idx + 4)
        torch.no_grad()(step)(torch.randn(4, 4), torch.arange(4))
        """, cut=str(tmp_path / "call2.pt"))
    assert without.cut is not None and without.cut["autocast"] == []


def test_the_saved_call_is_recorded_for_the_parent_to_write_it_as_source(runner, tmp_path):
    # small tensors with their values, a module by how it was built, what has no form
    # (an optimizer) by its type: the parent writes the call as source when it can
    obs = watched(runner, """\
        import functools
        import torch
        from torch.utils.data import DataLoader
        head = torch.nn.Linear(3, 2, bias=False)
        opt = torch.optim.SGD(head.parameters(), lr=0.1)
        def collate(rows, model, optimizer):
            return torch.stack(rows)
        rows = [torch.tensor([1.5, 2.0, 0.5])] * 2 + [torch.zeros(2, dtype=torch.int64)]
        for batch in DataLoader(rows, batch_size=3, collate_fn=functools.partial(collate, model=head, optimizer=opt)):
            pass
        """, cut=str(tmp_path / "call.pt"))
    assert obs.signature.type == "RuntimeError"
    assert obs.cut is not None and obs.cut["object"] == "collate"
    call = obs.cut["call"]
    rows, model, optimizer = call["args"]
    assert rows == {"seq": [{"t": "args[0][0]"}, {"t": "args[0][1]"}, {"t": "args[0][2]"}], "tuple": False}
    assert call["meta"]["args[0][0]"]["values"] == [1.5, 2.0, 0.5]
    assert (call["meta"]["args[0][2]"]["dtype"], call["meta"]["args[0][2]"]["values"]) == ("int64", [0, 0])
    assert model == {"module": "torch.nn.Linear(3, 2, bias=False)"}
    assert optimizer == {"unknown": "SGD"}
