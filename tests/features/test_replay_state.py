"""The state at the failing step, saved once and replayed (issue 21): real workers and
real torch on the CPU.  The originals here take seconds; the threshold for saving the
state (``state.LONG_RUN``: six imports of torch) is lowered so that they get one."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import shrinkgpu.reducer.resume as kept_first
import shrinkgpu.reducer.start as start
import shrinkgpu.reducer.state as state_rules
from conftest import tree_digest
from shrinkgpu.reducer import ReduceConfig, reduce
from shrinkgpu.reducer.events import Stage

# The bug needs all three of the step's states: the weights after training, the
# optimizer's momentum, the scheduler's count.  Cut the loop, or restore only some of
# them, and the index is another (or there is none).
TRAINED = """\
import random

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
random.seed(0)
model = nn.Linear(4, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=50, gamma=0.9)
x = torch.randn(64, 4)
y = x @ torch.full((4, 3), 2.0)
table = torch.zeros(8, 2)
history = []
for step in range(4000):
    loss = F.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    history.append(loss.item())
    trained = int(model.weight.abs().sum() > 20.0)
    moving = int(opt.state[model.weight]["momentum_buffer"].abs().sum() > 0)
    late = int(sched.last_epoch >= 1500)
    code = torch.tensor([3 * (trained + moving + late)])
    F.embedding(code, table)
print("done")
"""

# TRAINED with its rows drawn by a data class of the user's, 64 KiB of them: a candidate
# from the state still builds it before the restore, unless it loads the saved object.
DRAWN = TRAINED.replace(
    "x = torch.randn(64, 4)\n",
    "import numpy as np\n\n\n"
    "class Points:\n"
    "    def __init__(self, n, seed):\n"
    "        self.x = np.random.default_rng(seed).normal(size=(n, 4)).astype(np.float32)\n\n"
    "    def rows(self):\n"
    "        return torch.from_numpy(self.x[:64])\n\n\n"
    "data = Points(4096, seed=3)\n"
    "x = data.rows()\n",
).replace(
    # the failing step reads the rows too (a normal draw is never above 9: the index is
    # the original's)
    "code = torch.tensor([3 * (trained + moving + late)])\n",
    "code = torch.tensor([3 * (trained + moving + late)]) + int(x[0, 0] > 9)\n",
)

# TRAINED with its rows built by a data helper of the user's (plain lists, 170 KB): the
# statement that calls it is what a candidate from the state runs before the restore.
HELPED = TRAINED.replace(
    "x = torch.randn(64, 4)\n",
    "\n\ndef draw(rng):\n"
    "    return [rng.gauss(0, 1) for _ in range(4)]\n\n\n"
    "def build_rows(n, seed):\n"
    "    rng = random.Random(seed)\n"
    "    rows = [draw(rng) for _ in range(n)]\n"
    "    return rows, [sum(r) for r in rows]\n\n\n"
    "rows, sums = build_rows(4096, 3)\n"
    "x = torch.tensor(rows[:64])\n",
).replace(
    "code = torch.tensor([3 * (trained + moving + late)])\n",
    "code = torch.tensor([3 * (trained + moving + late)]) + int(sums[0] > 99)\n",
)

# The count the bug needs lives in a global a function changes: not a value the loop
# binds, so the state does not hold it, and the replay starts from 0.
HIDDEN = """\
import torch
import torch.nn.functional as F

calls = 0


def bump():
    global calls
    calls += 1
    return calls


table = torch.zeros(8, 2)
for step in range(3000):
    k = bump()
    total = torch.arange(k).sum()
    if step == 2000:
        F.embedding(torch.tensor([k]), table)
"""


# An ``evaluate`` that validated during training fails on the test set, at its first
# batch: the state is the one of its last call, after the training wrote the checkpoint.
EVALUATED = """\
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Linear(4, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
x = torch.randn(64, 4)
y = x @ torch.full((4, 3), 2.0)
table = torch.zeros(8, 2)


def evaluate(net, rows):
    for row in rows:
        code = torch.tensor([row + 3 * int(net.weight.abs().sum() > 20.0)])
        F.embedding(code, table)


os.makedirs("runs", exist_ok=True)
evaluate(model, [0, 1])
for step in range(3000):
    loss = F.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 1000 == 999:
        evaluate(model, [0, 1])
        torch.save(model.state_dict(), "runs/best.pt")
best = nn.Linear(4, 3)
best.load_state_dict(torch.load("runs/best.pt"))
evaluate(best, [5, 6])
"""


# The loader's collate function fails at epoch 3, on the batch that holds the row the
# dataset shortens from then on: the loop's header called the loader, which called the
# user's function, and that call alone is the bug (no trained weight is in it).
COLLATED = """\
import torch
from torch.utils.data import DataLoader, Dataset


class Rows(Dataset):
    def __init__(self):
        self.epoch = 0

    def __len__(self):
        return 8

    def __getitem__(self, i):
        return torch.zeros(3 - int(self.epoch >= 3 and i == 5))


def collate(rows):
    return torch.stack(rows)


rows = Rows()
model = torch.nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(6):
    rows.epoch = epoch
    for batch in DataLoader(rows, batch_size=4, collate_fn=collate):
        loss = model(batch).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def reduce_script(tmp_path, monkeypatch, text: str, max_tests: int = 200, keep_error: str = "index out of range",
                  slower: float = 10.0):
    monkeypatch.setattr(state_rules, "LONG_RUN", 0.0)
    # These originals fail within 2-3 s, where a replay's interpreter start is most of its
    # time: whether it saves enough (0.7 of the original) depends on the machine's speed.
    monkeypatch.setattr(start, "SLOWER_REPLAY", slower)
    work = tmp_path / "job"
    work.mkdir()
    script = work / "train.py"
    script.write_text(text)
    before = tree_digest(work)
    events: list[str] = []
    out = tmp_path / "out" / "train.min.py"
    result = reduce(
        # (observed sizes off: the tests are about the state; with them, the table's size as
        # the run computed it can leave no state to load)
        ReduceConfig(script=script, keep_error=keep_error, output=out, verify_runs=1, jobs=2,
                     max_tests=max_tests, observed_sizes=False, env={**os.environ}),
        on_event=lambda e: events.append(e.message) if isinstance(e, Stage) else None,
    )
    assert tree_digest(work) == {**before}  # the user's directory as it was (no state file there)
    return result, events, out


@pytest.mark.slow
def test_a_state_with_a_model_a_momentum_optimizer_and_a_scheduler_replays_the_first_error(tmp_path, monkeypatch):
    result, events, out = reduce_script(tmp_path, monkeypatch, TRAINED)

    # the failing call alone came first, before the search
    written = next(i for i, m in enumerate(events) if m.startswith("the failing call alone is written"))
    reducing = next(i for i, m in enumerate(events) if m.startswith("reducing"))
    assert written < reducing
    assert result.extracted is not None and result.extracted.path.is_file()

    assert any("replays the bug in a fresh interpreter" in n and "iteration 1499 of `for step in range(4000):`" in n
               for n in result.notes), result.notes
    assert result.start["from"] == "saved state"
    text = out.read_text()
    assert "train.min.state.pt" in text and "load_state_dict" in text, text
    assert "for step in range(4000)" not in text  # the 1499 steps before the failure are gone
    state = out.with_name("train.min.state.pt")
    assert state.is_file()
    assert result.data_files == {"train.min.state.pt": result.data_files["train.min.state.pt"]}
    # the result fails under plain python, beside its state file, with the same first error
    plain = subprocess.run([sys.executable, out.name], cwd=out.parent, capture_output=True, text=True, timeout=120)
    assert plain.returncode == 1 and "IndexError: index out of range in self" in plain.stderr, plain.stderr
    assert result.verified == (1, 1)
    assert (result.state["file"], result.state["iteration"], result.state["loop"]) == (
        "train.min.state.pt", 1499, "for step in range(4000):")
    assert {"model", "opt", "sched"} <= set(result.state["restores"])
    report = result.report.read_text()
    assert ("`train.min.state.pt`: the state at the start of iteration 1499 of `for step in range(4000):` (train.py)"
            in report and "It holds your weights" in report)


@pytest.mark.slow
def test_a_state_that_does_not_replay_is_reported_and_not_used(tmp_path, monkeypatch):
    result, events, out = reduce_script(tmp_path, monkeypatch, HIDDEN)

    assert any(
        "the state at iteration 2000 of `for step in range(3000):` (train.py) is not used: starting there did not "
        "fail the same way (finished without error" in n for n in result.notes
    ), result.notes
    assert result.start["from"] != "saved state"
    text = out.read_text()
    assert "state" not in text
    assert not out.with_name("train.min.state.pt").exists()
    assert result.data_files == {} and result.state is None
    assert result.verified == (1, 1)
    assert result.signature.same_bug(result.final_signature, free=frozenset(result.varying))


@pytest.mark.slow
def test_a_state_whose_replay_saves_too_little_time_is_reported_and_not_used(tmp_path, monkeypatch):
    # A replay that fails the same way but takes more than this share of the original's
    # run (any replay does, at 1/1000) saves too little to be worth the file it needs.
    result, events, out = reduce_script(tmp_path, monkeypatch, TRAINED, max_tests=5, slower=0.001)

    assert any(
        "the state at iteration 1499 of `for step in range(4000):` (train.py) is not used: starting there saves too "
        "little time (it fails the same way, but in " in n for n in result.notes
    ), result.notes
    assert result.start["from"] != "saved state"
    text = out.read_text()
    assert "train.min.state.pt" not in text and "load_state_dict" not in text, text
    assert not out.with_name("train.min.state.pt").exists()
    assert result.data_files == {} and result.state is None
    assert result.signature.same_bug(result.final_signature, free=frozenset(result.varying))


@pytest.mark.slow
def test_resume_keeps_the_saved_state_and_the_extracted_call(tmp_path, monkeypatch):
    monkeypatch.setattr(state_rules, "LONG_RUN", 0.0)
    monkeypatch.setattr(kept_first, "KEEP_MIN_SECONDS", 0.0)  # its first run is kept too
    # (what is tested is what --resume keeps, not whether the start saves enough time: on
    # a loaded machine the fresh start of torch alone nears this short original's run)
    monkeypatch.setattr(start, "SLOWER_REPLAY", 10.0)
    script = tmp_path / "train.py"
    script.write_text(TRAINED)
    out = tmp_path / "out" / "train.min.py"

    def run(resume: bool):
        events: list[str] = []
        result = reduce(
            # One candidate: the result still starts from the state (a longer search may
            # find the bug without it, and then the state is not left beside the result).
            ReduceConfig(script=script, keep_error="index out of range", output=out, verify_runs=1, jobs=2,
                         max_tests=1, resume=resume, confirm=0),
            on_event=lambda e: events.append(e.message) if isinstance(e, Stage) else None,
        )
        return result, events

    first, first_events = run(resume=False)
    assert any(m.startswith("running the original once more: saving the state") for m in first_events)
    assert out.with_name("train.min.state.pt").is_file() and out.with_name("train.min.state.json").is_file()

    assert any(m.startswith("the original's first run is kept in train.min.first/") for m in first_events)
    assert (out.parent / "train.min.first" / "first.pkl").is_file()

    again, events = run(resume=True)
    # nothing of the original runs again: neither its first run nor the one saving the state
    assert "running the original in a fresh interpreter" not in events, events
    assert any(m.startswith("--resume: the original's first run (") and "kept in train.min.first/" in m
               for m in events), events
    assert not any(m.startswith("running the original once more") for m in events), events
    assert any(m.startswith("--resume: the extracted call at") and m.endswith("still fails the same way: kept")
               for m in events), events
    assert any(m.startswith("--resume: the state saved at iteration 1499 of `for step in range(4000):`")
               for m in events), events
    assert again.extracted is not None and again.extracted.text == first.extracted.text
    # the kept call is compared one change at a time as the first run's was
    assert again.extracted.op == first.extracted.op
    assert [w for w, _n, _m in again.extracted.arguments] == [w for w, _n, _m in first.extracted.arguments]
    assert again.ablation is not None and first.ablation is not None and again.ablation.kind == first.ablation.kind
    assert any("replays the bug in a fresh interpreter" in n for n in again.notes), again.notes
    assert again.verified == (1, 1)


@pytest.mark.slow
def test_the_state_of_a_function_called_before_is_saved_in_the_call_that_failed(tmp_path, monkeypatch):
    # (what is tested is where the state is saved and what it carries, not whether the
    # start saves enough time: this original takes seconds, as a fresh start of torch does)
    monkeypatch.setattr(start, "SLOWER_REPLAY", 10.0)
    result, events, out = reduce_script(tmp_path, monkeypatch, EVALUATED, max_tests=30)

    # the fifth call of evaluate (one before training, three validations, the test), with
    # the checkpoint the training wrote, which the statement before the test loads
    assert any("iteration 0 of `for row in rows:` (train.py, in call 5 of the function that holds it)" in n
               and "replays the bug in a fresh interpreter" in n
               and "with 1 file(s) the run wrote before it: runs/best.pt, 0.0 MiB in train.min.state.files" in n
               for n in result.notes), result.notes
    assert result.start["from"] == "saved state"
    text = out.read_text()
    assert "for step in range(3000)" not in text, text
    assert result.verified == (1, 1)
    # what the result reads is beside it, and it fails under plain python there
    for name in result.data_files:
        assert (out.parent / name).exists(), name
    if "train.min.state.files" in text:
        assert (out.parent / "train.min.state.files" / "runs" / "best.pt").is_file()
        assert result.state["files_dir"] == "train.min.state.files"
        assert "`train.min.state.files/`: the files the original had written" in result.report.read_text()
    else:
        assert not (out.parent / "train.min.state.files").exists()
    plain = subprocess.run([sys.executable, out.name], cwd=out.parent, capture_output=True, text=True, timeout=120)
    assert plain.returncode == 1 and "IndexError: index out of range in self" in plain.stderr, plain.stderr


@pytest.mark.slow
def test_a_library_call_into_the_users_function_that_fails_alone_needs_no_saved_state(tmp_path, monkeypatch):
    monkeypatch.setattr(start, "SLOWER_REPLAY", 10.0)  # (this original takes as long as a start of torch)
    result, events, out = reduce_script(tmp_path, monkeypatch, COLLATED, max_tests=60, keep_error="stack expects")

    assert any(n.startswith("the original with the library's call into your code made directly fails the same "
                            "way in a fresh interpreter") for n in result.notes), result.notes
    assert any(n.startswith("no state is saved at iteration 3 of `for epoch in range(6):`") for n in result.notes)
    assert not any(m.startswith("running the original once more") for m in events), events
    assert events.count("checking in a fresh interpreter whether the library's call into your code made directly "
                        "fails the same way") == 1
    assert result.state is None and not out.with_name("train.min.state.pt").exists()
    # the epochs, the loader, the dataset and the model are gone: the batch the library
    # passed is enough, and its rows are small and exact (zeros): the call is written as
    # source, and the result loads nothing (issue 48, item 1)
    assert out.read_text() == (
        "import torch\n"
        "torch.stack([torch.tensor([0.0, 0.0, 0.0]), torch.tensor([0.0, 0.0]), torch.tensor([0.0, 0.0, 0.0]), "
        "torch.tensor([0.0, 0.0, 0.0])])\n"
    )
    assert not out.with_name("train.call.pt").exists()
    assert result.verified == (1, 1)
    plain = subprocess.run([sys.executable, out.name], cwd=out.parent, capture_output=True, text=True, timeout=120)
    assert plain.returncode == 1 and "stack expects each tensor to be equal size" in plain.stderr, plain.stderr


@pytest.mark.slow
def test_started_from_the_state_data_built_by_less_code_than_its_file_carries_is_built_not_loaded(
        tmp_path, monkeypatch):
    # Points(4096, seed=3) is 64 KiB pickled and a few dozen tokens of code: the search
    # counts what a loaded file carries, so a pickle is no reduction here (issue 48).
    result, events, out = reduce_script(tmp_path, monkeypatch, DRAWN, max_tests=4)

    assert result.start["from"] == "saved state", result.notes
    assert any(n.startswith("started from the saved state: loading the data objects the first run saved is "
                            "tried first") for n in result.notes), result.notes
    assert result.passes.get("load-saved-objects", {}).get("reproduced", 0) == 0
    text = out.read_text()
    assert "Points(4096" in text and "pickle" not in text, text
    assert not result.loaded_objects
    assert not list(out.parent.glob("*.pkl"))
    assert result.verified == (1, 1)
    plain = subprocess.run([sys.executable, out.name], cwd=out.parent, capture_output=True, text=True, timeout=120)
    assert plain.returncode == 1 and "IndexError: index out of range in self" in plain.stderr, plain.stderr


@pytest.mark.slow
def test_started_from_the_state_a_data_helper_smaller_than_its_result_stays(tmp_path, monkeypatch):
    result, events, out = reduce_script(tmp_path, monkeypatch, HELPED, max_tests=4)

    assert result.start["from"] == "saved state", result.notes
    assert result.passes.get("load-saved-objects", {}).get("reproduced", 0) == 0
    text = out.read_text()
    assert "build_rows(4096, 3)" in text and "pickle" not in text, text
    assert not result.loaded_objects
    assert not (out.parent / "train.min.rows-sums.pkl").exists()
    assert result.verified == (1, 1)
    plain = subprocess.run([sys.executable, out.name], cwd=out.parent, capture_output=True, text=True, timeout=120)
    assert plain.returncode == 1 and "IndexError: index out of range in self" in plain.stderr, plain.stderr


# Saves its best checkpoint (after a warm-up) as a dict while it trains, then loads the
# dict as if it were the bare state_dict: the failure after the loop needs the file the
# loop wrote, and nothing the loop computed besides; the loop's first iteration writes none.
BEST_CHECKPOINT = """\
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
best = None
for epoch in range(4000):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if epoch >= 500 and (best is None or loss.item() < best):
        best = loss.item()
        torch.save({"epoch": epoch, "model_state_dict": model.state_dict()}, "best.pt")
model.load_state_dict(torch.load("best.pt"))
"""


@pytest.mark.slow
def test_a_failure_after_the_loop_on_the_file_it_wrote_starts_without_the_loop_and_the_file_put_back(
        tmp_path, monkeypatch):
    result, _events, out = reduce_script(tmp_path, monkeypatch, BEST_CHECKPOINT, max_tests=150,
                                         keep_error="Error.s. in loading state_dict")
    assert result.start["what"] == (
        "the original with the loops that took its time cut and the files they wrote put back")
    assert any("best.pt" in n and "hold your weights or data" in n.replace("holds", "hold") for n in result.notes)
    text = out.read_text()
    assert "range(4000)" not in text and "train.min.files" in text and "torch.load" in text, text
    assert set(result.data_files) == {"train.min.files"}
    assert out.with_name("train.min.files").joinpath("best.pt").is_file()
    # the result fails under plain python, beside the files it copies back, with the same first error
    plain = subprocess.run([sys.executable, out.name], cwd=out.parent, capture_output=True, text=True, timeout=120)
    assert plain.returncode == 1 and "Missing key(s) in state_dict" in plain.stderr, plain.stderr
    assert result.verified == (1, 1)


@pytest.mark.slow
def test_a_loop_whose_first_iteration_writes_the_file_is_cut_to_it_and_the_result_needs_no_file(
        tmp_path, monkeypatch):
    saves_at_once = BEST_CHECKPOINT.replace("epoch >= 500 and ", "")
    result, _events, out = reduce_script(tmp_path, monkeypatch, saves_at_once, max_tests=150,
                                         keep_error="Error.s. in loading state_dict")
    assert result.start["what"] == "the original with the loops that took its time cut to their first iteration"
    assert result.data_files == {} and not out.with_name("train.min.files").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    plain = subprocess.run([sys.executable, str(out)], cwd=empty, capture_output=True, text=True, timeout=120)
    assert plain.returncode == 1 and "Missing key(s) in state_dict" in plain.stderr, plain.stderr
