"""probe/state.py: the program's state at the start of the failing iteration, saved
once, and the files a run wrote.
"""

from __future__ import annotations

import textwrap

from worker.helpers import line_of, run


def test_the_state_at_the_start_of_an_iteration_is_saved_once(fork_runner, tmp_path):
    import torch

    from shrinkgpu.worker import StateAt

    text = textwrap.dedent("""\
        import torch
        model = torch.nn.Linear(2, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2)
        losses = []
        loader = iter(range(100))
        log_alpha = torch.zeros(1, requires_grad=True)  # its optimizer updates it
        alpha_opt = torch.optim.Adam([log_alpha])
        class Env:
            def __init__(self):
                self.t = torch.zeros(1)
            def advance(self):
                self.t += 1
        env = Env()
        for epoch in range(3):
            for step in range(5):
                env.advance()
                loss = model(torch.ones(1, 2)).sum()
                loss.backward()
                opt.step()
                sched.step()
                losses.append(float(loss))
        torch.zeros(2).view(3)
        """)
    path = tmp_path / "state.pt"
    progress = tmp_path / "progress"
    at = StateAt("s.py", line_of(text, "for step"), ((line_of(text, "for epoch"), 2), (line_of(text, "for step"), 3)),
                 str(path), ("epoch", "step", "loss", "losses", "loader", "env.*"), str(progress))
    obs = run(fork_runner, text, state=at)
    kinds = {e["expr"]: e["kind"] for e in obs.state["entries"]}
    assert kinds == {"model": "load", "opt": "load", "sched": "load", "losses": "value", "epoch": "value",
                     "step": "value", "loss": "value", "log_alpha": "copy", "alpha_opt": "load", "env.t": "value"}
    assert obs.state["left"] == [{"expr": "loader", "why": "a range_iterator (not data a file can carry)"}]
    assert (obs.state["iteration"], obs.state["function"]) == (3, "<module>")
    saved = torch.load(path, weights_only=False)
    assert (saved["epoch"], saved["step"], len(saved["losses"])) == (2, 3, 13)  # 2 epochs of 5, then 3 steps
    assert saved["sched"]["last_epoch"] == 13
    assert set(saved["opt"]["state"]) == {0, 1}  # the momentum buffers
    assert saved["loss"].grad_fn is None  # cut from its graph
    assert saved["env.t"].item() == 13.0
    assert {"rng:random", "rng:torch"} <= set(saved)  # (and numpy's, when the run imported numpy)
    # the script ran on to its own first error
    assert obs.signature.op.name == "Tensor.view"
    # where the loops were, for the progress lines: written at once, then every 5 s
    assert progress.read_text() == "0,0"


def test_a_loop_in_a_function_saves_the_module_level_model_it_trains(fork_runner, tmp_path):
    from shrinkgpu.worker import StateAt

    text = textwrap.dedent("""\
        import torch
        model = torch.nn.Linear(2, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        unused = torch.nn.Linear(3, 3)

        def forward_twice(x):
            for _ in range(2):  # a loop of another function, not traced
                x = model(x)
            return x

        def train():
            for step in range(4):
                forward_twice(torch.ones(1, 2)).sum().backward()
                opt.step()
            torch.zeros(2).view(3)

        train()
        """)
    path = tmp_path / "state.pt"
    at = StateAt("s.py", line_of(text, "for step"), ((line_of(text, "for step"), 2),), str(path), ("step",))
    obs = run(fork_runner, text, state=at)
    kinds = {e["expr"]: e["kind"] for e in obs.state["entries"]}
    assert kinds == {"step": "value", "model": "load", "opt": "load"}  # not `unused`: train() never names it
    assert obs.state["function"] == "train"


def test_the_plain_attributes_of_a_module_the_user_wrote_are_saved_with_its_weights(fork_runner, tmp_path):
    from shrinkgpu.worker import StateAt

    text = textwrap.dedent("""\
        import torch
        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(2, 2)
                self.batch_size = 32  # a callback ramps it
        model = Net()
        for epoch in range(5):
            model.batch_size *= 2
        torch.zeros(2).view(3)
        """)
    at = StateAt("s.py", line_of(text, "for epoch"), ((line_of(text, "for epoch"), 3),), str(tmp_path / "s.pt"), ())
    kinds = {e["expr"]: e["kind"] for e in run(fork_runner, text, state=at).state["entries"]}
    assert kinds == {"model": "load", "model.batch_size": "value"}
    import torch
    assert torch.load(tmp_path / "s.pt", weights_only=False)["model.batch_size"] == 256


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
