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
