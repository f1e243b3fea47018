"""syntax/tidy.py: the comments of a reduced program that no longer describe code go;
the exact text before and after."""

from __future__ import annotations

import textwrap

from shrinkgpu.syntax.tidy import tidy

ORIGINAL = textwrap.dedent('''\
    #!/usr/bin/env python
    # coding: utf-8

    # # Training notebook
    # Readers may ignore the next cell.

    # In[1]:


    import torch
    import torch.nn as nn  # layers


    # In[2]:


    # ## Summary
    # ---
    print(summary(model))  # the summary call


    # In[3]:


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            #self.dropout = nn.Dropout(self.dropout_p)
            # the head
            self.fc = nn.Linear(4, 3)  # TODO: a wider layer


    y = torch.tensor([0, 2, 4])  # invalid class
    loss = F.cross_entropy(torch.randn(3, 3), y)
    ''')


def test_comments_stay_only_with_the_unchanged_code_they_describe():
    reduced = (ORIGINAL.replace("print(summary(model))  # the summary call\n", "")
               .replace("[0, 2, 4]", "[0, 2, 3]") + "   \n\n\n\n")
    assert tidy(reduced, [ORIGINAL]) == textwrap.dedent('''\
        #!/usr/bin/env python
        # coding: utf-8


        # In[1]:


        import torch
        import torch.nn as nn  # layers


        # In[3]:


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                # the head
                self.fc = nn.Linear(4, 3)  # TODO: a wider layer


        y = torch.tensor([0, 2, 3])
        loss = F.cross_entropy(torch.randn(3, 3), y)
        ''')


def test_a_program_without_comments_or_stray_blank_lines_is_left_as_it_is():
    text = "import torch\n\n\nx = torch.ones(2)\n"
    assert tidy(text, [text]) == text
    # a comment above a statement the reduction changed describes what is gone
    assert tidy("# ten classes\nn = 3\n", ["# ten classes\nn = 10\n"]) == "n = 3\n"
    assert tidy("# ten classes\nn = 10\n", ["# ten classes\nn = 10\n"]) == "# ten classes\nn = 10\n"


def test_a_statement_left_right_under_a_definition_gets_the_original_s_blank_lines():
    original = textwrap.dedent('''\
        import torch


        def gate(x):
            return x


        data = [1, 2, 3]
        fn = torch.compile(gate)


        class Head:
            size = 4

            def forward(self, x):
                return x

            # the width
            width = 8
            depth = 2
        ''')
    # the blank lines under ``gate`` belonged to ``data``, those under ``forward`` to
    # ``width``'s comment block: both deleted
    reduced = "import torch\n\n\ndef gate(x):\n    pass\nfn = torch.compile(gate)\n\n\nclass Head:\n" \
              "    def forward(self, x):\n        return x\n    depth = 2\n"
    assert tidy(reduced, [original]) == (
        "import torch\n\n\ndef gate(x):\n    pass\n\n\nfn = torch.compile(gate)\n\n\nclass Head:\n"
        "    def forward(self, x):\n        return x\n\n    depth = 2\n")
    # a file whose definitions sit right against the code keeps that style
    tight = "import torch\ndef f():\n    pass\nf()\n"
    assert tidy(tight, [tight]) == tight
    # one blank line where the original used one
    one = "def f():\n    pass\n\nx = 1\nf()\n"
    assert tidy("def f():\n    pass\nf()\n", [one]) == "def f():\n    pass\n\nf()\n"


def test_the_cleanup_never_changes_a_program_s_tokens():
    # issue 24: no result may grow from the cleanup; it changes comments and blank lines
    # only, which are not tokens
    from shrinkgpu.syntax import count_tokens

    reduced = "import torch\n\n\ndef gate(x):\n    pass\nfn = torch.compile(gate)  # the gate\n# a note\n"
    for text, originals in [(ORIGINAL, [ORIGINAL]), (reduced, [ORIGINAL]),
                            (reduced, ["def f():\n    pass\n\n\nx = 1\n"])]:
        out = tidy(text, originals)
        assert count_tokens(out) == count_tokens(text)
        assert out != text
