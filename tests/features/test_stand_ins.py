"""A constructor call that fails inside the user's classes reduces to the call alone, with
no object standing in for the instance around it (``self = 0``) nor for arguments the
failing call never uses (``Trainer(0, 0, ...)`` of an emptied class), whichever passes
lift it (issue 48, item 5).  Real reductions: real workers, torch on the CPU.

The failing constructor belongs to a library, as torchmetrics' ``Accuracy`` (whose
``__new__`` wants ``task``) does in the scripts this comes from: a small package written
outside the script's directory and put on ``PYTHONPATH``, so that it is installed code
to the reducer, never a local module it would paste in.  The real Lightning and
torchmetrics, where installed, in the last test.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from shrinkgpu.readability import orphaned_comments, placeholders
from shrinkgpu.reducer import ReduceConfig, reduce, run_once
from shrinkgpu.worker import Isolation

pytestmark = pytest.mark.usefixtures("short_scripts_stay_short")

MISSING_TASK = "missing 1 required positional argument: 'task'"

LIBRARY = '''\
"""A metrics library whose task-generic classes are factories, and a training framework."""
import torch.nn as nn


class LightningModule(nn.Module):
    def log(self, name, value):
        pass


class Accuracy(nn.Module):
    def __new__(cls, task, num_classes=None):
        return super().__new__(cls)

    def __init__(self, task, num_classes=None):
        super().__init__()
        self.task, self.num_classes = task, num_classes
'''

LIGHTNING_INIT = """\
import torch
import torch.nn as nn
import torch.nn.functional as F
from minilib import Accuracy, LightningModule


class LitClassifier(LightningModule):
    def __init__(self, hidden=32, num_classes=10, lr=1e-3):
        super().__init__()
        self.lr = lr
        self.net = nn.Sequential(nn.Linear(28 * 28, hidden), nn.ReLU(), nn.Linear(hidden, num_classes))
        self.train_acc = Accuracy()
        self.val_acc = Accuracy()

    def forward(self, x):
        return self.net(x.flatten(1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        self.train_acc(logits.argmax(-1), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)


def main():
    torch.manual_seed(0)
    x = torch.randn(256, 1, 28, 28)
    y = torch.randint(0, 10, (256,))
    model = LitClassifier(hidden=64)
    opt = model.configure_optimizers()
    for i in range(0, 256, 32):
        loss = model.training_step((x[i:i + 32], y[i:i + 32]), i // 32)
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
"""

DATACLASS_POST_INIT = """\
from dataclasses import dataclass

import torch
from minilib import Accuracy


@dataclass
class EvalConfig:
    num_classes: int = 10
    threshold: float = 0.5
    batch_size: int = 64

    def __post_init__(self):
        if self.threshold <= 0:
            raise ValueError("threshold must be positive")
        self.metric = Accuracy(num_classes=self.num_classes)


def evaluate(logits, labels, cfg):
    preds = logits.argmax(-1)
    return cfg.metric(preds, labels)


torch.manual_seed(0)
logits = torch.randn(128, 10)
labels = torch.randint(0, 10, (128,))
cfg = EvalConfig(num_classes=10, batch_size=32)
print(evaluate(logits, labels, cfg))
"""

PLAIN_CLASS = """\
import torch
import torch.nn as nn
from minilib import Accuracy


class Evaluator:
    def __init__(self, model, num_classes, device="cpu"):
        self.model = model.to(device)
        self.device = device
        self.metric = Accuracy(num_classes=num_classes)

    @torch.no_grad()
    def run(self, x, y):
        self.model.eval()
        preds = self.model(x.to(self.device)).argmax(-1)
        return self.metric(preds, y)


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 5))
x = torch.randn(200, 16)
y = torch.randint(0, 5, (200,))
evaluator = Evaluator(model, num_classes=5)
print(evaluator.run(x, y))
"""

TRAINER_CALLBACK = """\
import torch
import torch.nn as nn
from minilib import Accuracy


class Callback:
    def on_epoch_end(self, trainer, epoch):
        pass


class MetricsCallback(Callback):
    def __init__(self, num_classes):
        super().__init__()
        self.acc = Accuracy(num_classes=num_classes)

    def on_epoch_end(self, trainer, epoch):
        print(epoch, self.acc)


class Trainer:
    def __init__(self, model, optimizer, loss_fn, callbacks=()):
        self.model, self.optimizer, self.loss_fn = model, optimizer, loss_fn
        self.callbacks = list(callbacks)

    def fit(self, x, y, epochs=3):
        for epoch in range(epochs):
            loss = self.loss_fn(self.model(x), y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            for cb in self.callbacks:
                cb.on_epoch_end(self, epoch)


def main():
    torch.manual_seed(0)
    x, y = torch.randn(64, 8), torch.randint(0, 4, (64,))
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    trainer = Trainer(
        model,
        torch.optim.SGD(model.parameters(), lr=0.1),
        nn.CrossEntropyLoss(),
        callbacks=[MetricsCallback(num_classes=4)],
    )
    trainer.fit(x, y)


if __name__ == "__main__":
    main()
"""

# What a maintainer writes: the failing call, the seeding the script did (which no
# reduction removes), the imports; blank lines are layout and not compared.
THE_CALL = ["import torch", "from minilib import Accuracy", "torch.manual_seed(0)", "Accuracy()"]


def reduce_in(tmp_path: Path, name: str, text: str, keep_error: str = MISSING_TASK, library: str | None = LIBRARY):
    """``text`` reduced as ``project/<name>`` with the library on ``PYTHONPATH``, the
    environment its runs and the check of the result share."""
    project = tmp_path / "project"
    project.mkdir()
    (project / name).write_text(text)
    env = dict(os.environ)
    if library is not None:
        site = tmp_path / "site" / "minilib"
        site.mkdir(parents=True)
        (site / "__init__.py").write_text(library)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site.parent), env.get("PYTHONPATH")) if p)
    out = tmp_path / "out" / name.replace(".py", ".min.py")
    out.parent.mkdir()
    result = reduce(ReduceConfig(script=project / name, cwd=project, keep_error=keep_error, output=out, env=env,
                                 jobs=1, max_tests=300, verify_runs=1, confirm=0, extract=False, ablate=False))
    return result, out, env


def assert_the_call_alone_fails_the_same_way(result, out: Path, env: dict, original: str) -> None:
    written = out.read_text()
    # the same bug, by the signature's rule, in a fresh interpreter where the result lies
    obs, _ = run_once(ReduceConfig(script=out, cwd=out.parent, env=env), isolation=Isolation.FRESH)
    assert obs.signature is not None, written
    assert result.signature.same_bug(obs.signature), result.signature.differences(obs.signature)
    assert obs.signature.headline == result.signature.headline
    # nothing a maintainer would have to delete by hand
    assert placeholders(written, [original]) == [], written
    assert orphaned_comments(written) == [], written


SHAPES = {
    "lightning-init": ("train_lit.py", LIGHTNING_INIT),
    "dataclass-post-init": ("evaluate.py", DATACLASS_POST_INIT),
    "plain-class": ("score.py", PLAIN_CLASS),
    "callback-built-with-the-trainer": ("fit.py", TRAINER_CALLBACK),
}


@pytest.mark.slow
@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_constructor_failing_inside_the_users_class_reduces_to_the_call_alone(tmp_path, shape):
    name, text = SHAPES[shape]
    result, out, env = reduce_in(tmp_path, name, text)
    assert result.signature.message.endswith(MISSING_TASK) and result.signature.op is None
    # inside the class, where the original raised
    assert result.signature.frame.function in ("__init__", "__post_init__")
    written = out.read_text()
    assert [line for line in written.splitlines() if line.strip()] == THE_CALL, written
    assert_the_call_alone_fails_the_same_way(result, out, env, text)


REAL_LIGHTNING = """\
import pytorch_lightning as pl
import torch
import torch.nn as nn
from torchmetrics import Accuracy


class LitMNIST(pl.LightningModule):
    def __init__(self, hidden=64, lr=2e-4):
        super().__init__()
        self.save_hyperparameters()
        self.model = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, hidden), nn.ReLU(), nn.Linear(hidden, 10))
        self.train_acc = Accuracy()
        self.val_acc = Accuracy()

    def forward(self, x):
        return self.model(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = nn.functional.cross_entropy(logits, y)
        self.train_acc(logits, y)
        self.log("train_acc", self.train_acc, prog_bar=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


torch.manual_seed(0)
data = torch.utils.data.TensorDataset(torch.randn(256, 1, 28, 28), torch.randint(0, 10, (256,)))
model = LitMNIST()
trainer = pl.Trainer(max_epochs=1, accelerator="cpu", logger=False, enable_checkpointing=False)
trainer.fit(model, torch.utils.data.DataLoader(data, batch_size=32))
"""


@pytest.mark.slow
def test_the_lightning_chapters_accuracy_without_its_task_is_the_call_alone(tmp_path):
    # the script issue 48 quotes, whose result was ``self = 0`` and ``self.train_acc = Accuracy()``
    pytest.importorskip("pytorch_lightning")
    pytest.importorskip("torchmetrics")
    result, out, env = reduce_in(tmp_path, "lit_mnist.py", REAL_LIGHTNING, library=None)
    written = out.read_text()
    assert [line for line in written.splitlines() if line.strip()] == [
        "import torch", "from torchmetrics import Accuracy", "torch.manual_seed(0)", "Accuracy()"], written
    assert_the_call_alone_fails_the_same_way(result, out, env, REAL_LIGHTNING)


def test_the_reduced_texts_of_these_shapes_before_this_rule_read_as_placeholders():
    # what the reductions of LIGHTNING_INIT and TRAINER_CALLBACK wrote before (issue 48):
    # the readability check the results above pass must see them
    lit = textwrap.dedent("""\
        import torch
        from minilib import Accuracy
        torch.manual_seed(0)
        self = 0
        self.train_acc = Accuracy()
        """)
    trainer = textwrap.dedent("""\
        import torch
        import torch.nn as nn
        from minilib import Accuracy


        class Callback:
            pass


        class MetricsCallback(Callback):
            def __init__(self, num_classes):
                self.acc = Accuracy(num_classes=num_classes)


        class Trainer:
            pass


        torch.manual_seed(0)
        Trainer(
            0,
            0,
            nn.CrossEntropyLoss(),
            callbacks=[MetricsCallback(num_classes=4)],
        )
        """)
    assert placeholders(lit, [LIGHTNING_INIT]) == ["self = 0"]
    assert placeholders(trainer, [TRAINER_CALLBACK]) == [
        "Trainer(0, 0, nn.CrossEntropyLoss(), callbacks=[MetricsCallback(num_classes=4)])"]
