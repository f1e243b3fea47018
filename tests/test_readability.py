"""readability.py: what it counts as an orphaned comment or a placeholder."""

from __future__ import annotations

from shrinkgpu.readability import orphaned_comments, placeholders


def test_orphaned_comments_are_the_ones_no_statement_follows_and_commented_out_code():
    text = ("#!/usr/bin/env python\n# coding: utf-8\n# ## Summary\n\n# In[2]:\n\n\nimport torch\n"
            "# the model\nm = torch.nn.Linear(2, 2)\n#m.eval()\nx = 1  # y = f(x)\n# In[3]:\n")
    assert orphaned_comments(text) == ["# ## Summary", "#m.eval()", "# y = f(x)", "# In[3]:"]


def test_placeholders_are_lines_no_person_writes_that_the_original_did_not_have():
    original = "import torch\nh = torch.ones(2)\nh\n"
    text = "import torch\nself = 0\nh = h\nh\ny = 0[0]\ndef f(self):\n    self = 1\n"
    assert placeholders(text, [original]) == ["self = 0", "h = h", "0[0]"]


def test_a_receiver_or_arguments_that_stand_in_for_objects_are_placeholders():
    # what lifting ``self.train_acc = Accuracy()`` out of a LightningModule's ``__init__``
    # left, inside a function; and a trainer emptied to ``pass`` around a failing callback
    original = ("class Lit(LightningModule):\n    def __init__(self):\n        self.train_acc = Accuracy()\n\n\n"
                "def main():\n    model = Lit()\n    trainer = Trainer(model, opt, nn.CrossEntropyLoss(),\n"
                "                      callbacks=[MetricsCallback(num_classes=6)])\n")
    text = ("class Trainer:\n    pass\n\n\ndef main():\n    self = 0\n    self.train_acc = Accuracy()\n\n\n"
            "Trainer(0, 0, nn.CrossEntropyLoss(), callbacks=[MetricsCallback(num_classes=6)])\n")
    assert placeholders(text, [original]) == [
        "self = 0", "Trainer(0, 0, nn.CrossEntropyLoss(), callbacks=[MetricsCallback(num_classes=6)])"]


def test_the_failing_call_alone_and_the_users_own_code_hold_no_placeholder():
    original = ("class Trainer:\n    pass\n\n\nbest = None\nfor m in models:\n    best = m\nbest.eval()\n"
                "Trainer(model)\n")  # the user's own call of a class that takes nothing: the bug, not a stand-in
    assert placeholders("from torchmetrics import AUROC\n\nAUROC(num_classes=6)\n", [original]) == []
    assert placeholders(original, [original]) == []
