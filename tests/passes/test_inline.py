"""inline-calls, inline-expressions and inline-bindings (passes/inline.py): the exact
program before and after their units.
"""

from __future__ import annotations

import pytest

from shrinkgpu.passes import InlineBindings, InlineCalls, InlineExpressions
from shrinkgpu.syntax import Edit

from .helpers import after, dedent, each, start

# --------------------------------------------------------------------------------------
# InlineCalls
# --------------------------------------------------------------------------------------

def test_inline_calls_a_call_statement_and_an_assignment_with_defaults_and_keywords():
    cand = start(
        """\
        import torch


        def setup(n):
            torch.manual_seed(n)  # seed


        def make(n, scale=2.0, *, dtype=None):
            \"\"\"A docstring is not code to run.\"\"\"
            t = torch.ones(n, dtype=dtype)
            return t * scale


        setup(0)
        x = make(3, dtype=torch.float64)
        """
    )
    assert each(InlineCalls(), cand) == [
        dedent(
            """\
            import torch


            def make(n, scale=2.0, *, dtype=None):
                \"\"\"A docstring is not code to run.\"\"\"
                t = torch.ones(n, dtype=dtype)
                return t * scale


            n = 0
            torch.manual_seed(n)  # seed
            x = make(3, dtype=torch.float64)
            """
        ),
        dedent(
            """\
            import torch


            def setup(n):
                torch.manual_seed(n)  # seed


            setup(0)
            n = 3
            scale = 2.0
            dtype = torch.float64
            t = torch.ones(n, dtype=dtype)
            x = t * scale
            """
        ),
    ]


def test_inline_calls_keeps_a_function_that_has_another_caller():
    cand = start(
        """\
        def double(v):
            return v * 2


        a = double(1)
        b = double(2)
        """
    )
    assert each(InlineCalls(), cand) == [
        "def double(v):\n    return v * 2\n\n\nv = 1\na = v * 2\nb = double(2)\n",
        "def double(v):\n    return v * 2\n\n\na = double(1)\nv = 2\nb = v * 2\n",
    ]


def test_inline_calls_a_function_without_return_assigned_gives_none():
    cand = start("def log(msg):\n    print(msg)\n\n\nr = log('hi')\n")
    # The call site's blank lines above stay with the statements replacing it.
    assert after(InlineCalls(), cand) == "\n\nmsg = 'hi'\nprint(msg)\nr = None\n"


MODULE = """\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        h = self.fc(x)
        return h.relu()

    def check(self, out):
        self.show(out)

    def show(self, t):
        print(t.shape)


model = Net()
out = model(torch.ones(2, 4))
model.check(out)
"""


def test_inline_calls_model_call_becomes_forward_with_self_bound():
    cand = start(MODULE)
    units = InlineCalls().units(cand, 0)
    forward = next(u for u in units if u[0].stmt == 14)  # out = model(...)
    assert InlineCalls().apply(cand, [forward]).files["a.py"] == dedent(
        """\
        import torch
        import torch.nn as nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 3)

            def check(self, out):
                self.show(out)

            def show(self, t):
                print(t.shape)


        model = Net()
        self = model
        x = torch.ones(2, 4)
        h = self.fc(x)
        out = h.relu()
        model.check(out)
        """
    )


def test_inline_calls_a_method_through_its_instance_and_through_self():
    cand = start(MODULE)
    units = {u[0].stmt: u for u in InlineCalls().units(cand, 0)}
    assert sorted(units) == [10, 14, 15]
    head, forward = MODULE.split("    def check")[0], "    def forward"
    assert forward in head
    # ``model.check(out)``: the body of ``check`` with ``self`` bound to ``model``; the
    # parameter ``out`` is the argument ``out``, so it needs no binding.
    assert InlineCalls().apply(cand, [units[15]]).files["a.py"] == head + dedent(
        """\
            def show(self, t):
                print(t.shape)


        model = Net()
        out = model(torch.ones(2, 4))
        self = model
        self.show(out)
        """
    )
    # ``self.show(out)`` inside ``check``: ``self`` is already ``self``.
    assert InlineCalls().apply(cand, [units[10]]).files["a.py"] == head + dedent(
        """\
            def check(self, out):
                t = out
                print(t.shape)


        model = Net()
        out = model(torch.ones(2, 4))
        model.check(out)
        """
    )


def test_inline_calls_a_no_grad_function_becomes_a_with_block():
    cand = start(
        """\
        import torch


        @torch.no_grad()
        def evaluate(model, x):
            y = model(x)
            return y.argmax(1)


        pred = evaluate(net, data)
        """
    )
    assert after(InlineCalls(), cand) == dedent(
        """\
        import torch


        model = net
        x = data
        with torch.no_grad():
            y = model(x)
            pred = y.argmax(1)
        """
    )


@pytest.mark.parametrize(
    "definition, call",
    [
        ("def early(x):\n    if x:\n        return 1\n    return 2\n", "a = early(1)"),
        ("def star(*args):\n    return args\n", "b = star(1, 2)"),
        ("def kw(**opts):\n    return opts\n", "b = kw(a=1)"),
        ("def gen():\n    yield 1\n", "c = gen()"),
        ("async def co():\n    return 1\n", "c = co()"),
        ("def deco():\n    return 1\n\n\ndeco = cache(deco)\n", "c = deco()"),
        ("@cache\ndef cached():\n    return 1\n", "c = cached()"),
        ("def two(a, b):\n    return a + b\n", "c = two(1)"),  # a missing argument
        ("def one(a):\n    return a\n", "c = one(1, b=2)"),  # an unknown keyword
        ("def one(a):\n    return a\n", "c = one(*xs)"),
        ("def glob():\n    global G\n    G = 1\n", "glob()"),
    ],
)
def test_inline_calls_leaves_what_it_cannot_paste(definition, call):
    cand = start(definition + "\n\n" + call + "\n")
    assert InlineCalls().units(cand, 0) == []


def test_inline_calls_never_pastes_a_recursive_call_into_its_own_function():
    cand = start("def rec(n):\n    rec(n - 1)\n\n\nrec(3)\n")
    units = InlineCalls().units(cand, 0)
    assert all(u[0].stmt == 2 for u in units)  # only the outer call site
    assert all(e.op != "delete" for u in units for e in u)  # rec still calls itself


def test_inline_calls_waits_for_a_rebase_after_other_edits():
    cand = start("def f():\n    return 1\n\n\nx = f()\ny = 2\n")
    assert InlineCalls().units(cand, 0) != []
    assert InlineCalls().units(cand.with_edits([Edit("delete", 3)]), 0) == []


def test_inline_a_constructor_of_a_class_with_only_init_left():
    cand = start(
        """\
        import torch.nn as nn


        class Net(nn.Module):
            def __init__(self, d, hidden, unused=3):
                super().__init__()
                self.fc = nn.Linear(d, hidden)


        model = Net(4, 8)
        out = model.fc(x)
        """
    )
    # (the blank lines that separated the class stay: they belong to the next statement)
    assert after(InlineCalls(), cand) == dedent(
        """\
        import torch.nn as nn


        model = nn.Module()
        self = model
        d = 4
        hidden = 8
        self.fc = nn.Linear(d, hidden)
        out = model.fc(x)
        """
    )


def test_a_constructor_that_never_touches_its_instance_is_its_body_with_no_receiver():
    # what is left of a callback whose ``__init__`` builds a failing metric, once the
    # store of the metric went (nothing read it back)
    cand = start(
        """\
        class Callback:
            pass


        class MetricsCallback(Callback):
            def __init__(self, num_classes, every=1):
                Accuracy(num_classes=num_classes)


        MetricsCallback(num_classes=6)
        unread = MetricsCallback(4)
        """
    )
    outs = each(InlineCalls(), cand)
    assert dedent(
        """\
        class Callback:
            pass


        class MetricsCallback(Callback):
            def __init__(self, num_classes, every=1):
                Accuracy(num_classes=num_classes)


        num_classes = 6
        Accuracy(num_classes=num_classes)
        unread = MetricsCallback(4)
        """
    ) in outs
    assert not any("self = " in o for o in outs)


def test_a_constructor_that_uses_its_instance_keeps_it():
    cand = start("import torch.nn as nn\n\n\nclass Head(nn.Module):\n    def __init__(self, n):\n"
                 "        super().__init__()\n        Accuracy(num_classes=n)\n\n\nHead(3)\n")
    assert not InlineCalls().units(cand, 0)


def test_a_dataclass_whose_post_init_never_touches_its_instance_is_that_body():
    text = (
        """\
        from dataclasses import dataclass


        @dataclass
        class EvalConfig:
            num_classes: int = 10

            def __post_init__(self):
                Accuracy(num_classes=10)


        EvalConfig(num_classes=10)
        """
    )
    # (the class goes, and with it the import only its decorator read)
    assert after(InlineCalls(), start(text)) == "\n\nAccuracy(num_classes=10)\n"
    # an argument that runs code is the construction's too: not offered
    assert not InlineCalls().units(start(text.replace("EvalConfig(num_classes=10)", "EvalConfig(n())")), 0)


def test_inline_a_list_backed_dataset_as_its_list():
    cand = start(
        """\
        from torch.utils.data import DataLoader, Dataset


        class Items(Dataset):
            def __init__(self, pairs):
                self.items = [(t, y) for t, y in pairs]

            def __len__(self):
                return len(self.items)

            def __getitem__(self, i):
                return self.items[i]


        ds = Items(data)
        loader = DataLoader(ds, batch_size=2)
        """
    )
    # ``Dataset`` stays imported: the line also binds ``DataLoader``.
    assert after(InlineCalls(), cand) == dedent(
        """\
        from torch.utils.data import DataLoader, Dataset


        pairs = data
        ds = [(t, y) for t, y in pairs]
        loader = DataLoader(ds, batch_size=2)
        """
    )


def test_a_dataset_that_does_more_than_index_a_list_is_not_a_list():
    cand = start(
        """\
        class Items:
            def __init__(self, pairs):
                self.items = list(pairs)

            def __len__(self):
                return len(self.items)

            def __getitem__(self, i):
                return self.items[i] * 2


        ds = Items(data)
        """
    )
    assert InlineCalls().units(cand, 0) == []


def test_inline_a_forward_whose_call_heads_a_subscript_or_method_chain():
    cand = start(
        """\
        import torch.nn as nn


        class Net(nn.Module):
            def forward(self, ids, mask):
                h = self.emb(ids)
                return self.head(h)


        model = Net()
        logits = model(ids, mask)[:, :-1].float()
        """
    )
    assert each(InlineCalls(), cand) == [dedent(
        """\
        import torch.nn as nn


        class Net(nn.Module):
            pass


        model = Net()
        self = model
        h = self.emb(ids)
        logits = self.head(h)[:, :-1].float()
        """
    )]
    # an index that reads a name the body could rebind stays out
    cand = start("def f(x):\n    k = 1\n    return x\n\ny = f(a)[k]\n")
    assert InlineCalls().units(cand, 0) == []


def test_inlining_keeps_a_parameter_that_only_an_indented_statement_reads():
    cand = start("def make(n, rng):\n    out = []\n    for _ in range(n):\n        out.append(rng())\n    return out\n"
                 "\n\npts = make(750, rng)\n")
    assert each(InlineCalls(), cand) == [
        "\n\nn = 750\nout = []\nfor _ in range(n):\n    out.append(rng())\npts = out\n"
    ]


def test_inline_a_call_inside_an_expression_that_runs_once_and_unconditionally():
    src = dedent("""\
        import torch
        def head(h):
            z = h.mean(0)
            return z * 2
        x = torch.randn(4, 3)
        y = torch.zeros(3)
        loss = torch.nn.functional.mse_loss(head(x), y) + 1
        """)
    assert each(InlineCalls(), start(src), 0) == [dedent("""\
        import torch
        x = torch.randn(4, 3)
        y = torch.zeros(3)
        h = x
        z = h.mean(0)
        loss = torch.nn.functional.mse_loss(z * 2, y) + 1
        """)]
    # The body rebinds a name the rest of the line reads: not inlined.
    clash = src.replace("loss = torch.nn.functional.mse_loss(head(x), y) + 1", "loss = z_of(head(x), y)\n").replace(
        "z = h.mean(0)", "y = h.mean(0)").replace("return z * 2", "return y * 2")
    assert not InlineCalls().units(start(clash), 0)
    # Under a condition or in a lambda: not inlined.
    cond = src.replace("mse_loss(head(x), y) + 1", "mse_loss(head(x) if x.numel() else x, y)")
    assert not InlineCalls().units(start(cond), 0)



def test_inline_a_users_method_in_the_arguments_of_a_library_call_the_line_is():
    # The line is a call of nn.Sequential, which is no code of the user's: the method
    # in its arguments is the call to inline (the model's width computed in one place).
    src = dedent("""\
        import torch.nn as nn
        class Net(nn.Module):
            def __init__(self, window):
                super().__init__()
                self.window = window
                self.head = nn.Sequential(nn.Flatten(), nn.Linear(self.flat_dim(), 8))
            def flat_dim(self):
                length = self.window // 4
                return 16 * length
        """)
    assert each(InlineCalls(), start(src), 0) == [dedent("""\
        import torch.nn as nn
        class Net(nn.Module):
            def __init__(self, window):
                super().__init__()
                self.window = window
                length = self.window // 4
                self.head = nn.Sequential(nn.Flatten(), nn.Linear(16 * length, 8))
        """)]

def test_inline_class_and_static_methods_called_on_the_class():
    src = dedent("""\
        class Config:
            size = 4
            @classmethod
            def from_cli(cls, argv):
                n = len(argv)
                return cls()
            @staticmethod
            def width(n):
                w = n * 2
                return w
        cfg = Config.from_cli([])
        w = Config.width(3)
        """)
    texts = each(InlineCalls(), start(src), 0)
    assert any("cls = Config\nargv = []\nn = len(argv)\ncfg = cls()\n" in t for t in texts), texts
    assert any("n = 3\nw = n * 2\nw = w\n" in t for t in texts), texts


# --------------------------------------------------------------------------------------
# InlineExpressions
# --------------------------------------------------------------------------------------

def test_inline_expressions_pastes_a_one_line_helper_into_every_call():
    cand = start(
        """\
        import re


        def tokenize(t):
            \"\"\"Words.\"\"\"
            return re.findall(r"\\w+", t.lower())


        def square(v):
            return v * v


        def collate(batch):
            return batch


        words = [tokenize(s) for s in lines]
        n = len(tokenize(text))
        sq = square(f(x))
        loader = DataLoader(data, collate_fn=collate)
        z = collate(1)
        """
    )
    # ``square`` would evaluate ``f(x)`` twice; ``collate`` is also used as a value.
    assert after(InlineExpressions(), cand) == dedent(
        """\
        import re


        def square(v):
            return v * v


        def collate(batch):
            return batch


        words = [re.findall(r"\\w+", s.lower()) for s in lines]
        n = len(re.findall(r"\\w+", text.lower()))
        sq = square(f(x))
        loader = DataLoader(data, collate_fn=collate)
        z = collate(1)
        """
    )


def test_inline_expressions_uses_defaults_and_parenthesises():
    cand = start("def scaled(x, k=2):\n    return x * k\n\n\ny = scaled(a + 1) ** 2\n")
    assert after(InlineExpressions(), cand) == "\n\ny = ((a + 1) * 2) ** 2\n"


def test_inline_expressions_substitutes_only_reads_of_parameters():
    cand = start("def norm(x, p=2):\n    return x.norm(p=p)\n\n\nn = norm(v, 1)\n")
    assert after(InlineExpressions(), cand) == "\n\nn = v.norm(p=1)\n"


# --------------------------------------------------------------------------------------
# InlineBindings
# --------------------------------------------------------------------------------------

BINDINGS_SRC = """\
import torch
import torch.nn as nn
net = nn.Sequential(
    nn.Linear(32, 1),
    nn.Linear(1, 4),
)
criterion = nn.CrossEntropyLoss()
emb, target = a, b
logits = net(emb)
criterion(logits, target)
"""


def test_inline_bindings_puts_a_single_use_value_where_it_is_read():
    # one of each pair per round: ``logits`` waits while ``net`` is pasted into its line
    assert after(InlineBindings(), start(BINDINGS_SRC)) == dedent(
        """\
        import torch
        import torch.nn as nn
        emb, target = a, b
        logits = nn.Sequential(
            nn.Linear(32, 1),
            nn.Linear(1, 4),
        )(emb)
        nn.CrossEntropyLoss()(logits, target)
        """
    )
    # an operation gets parentheses where it lands
    assert after(InlineBindings(), start("n = a + b\nf(n * 2)\n")) == "f((a + b) * 2)\n"


@pytest.mark.parametrize(
    "src",
    [
        "n = f(k)\ng(n)\ng(n)\n",  # read twice
        "w = torch.randn(4)\nfor q in qs:\n    h(w)\n",  # read in a loop: would run each time
        "w = f(x)\nys = [h(w, y) for y in ys]\n",  # ... or in a comprehension's body
        "w = f(x)\nx = 3\ng(w)\n",  # what the value reads is rebound in between
        "w = f(x)\nx.add_(1)\ng(w)\n",  # ... or changed in place
        "def f():\n    w = g()\n    return lambda: w\n",  # in a lambda
    ],
)
def test_inline_bindings_left_alone_where_the_value_would_run_differently(src):
    assert InlineBindings().units(start(src), 0) == []


def test_inline_bindings_into_a_comprehensions_first_iterable_runs_it_once():
    cand = start("xs = load()\nys = [f(x) for x in xs]\n")
    assert after(InlineBindings(), cand) == "ys = [f(x) for x in load()]\n"


def test_inline_calls_a_method_of_an_instance_made_for_the_call():
    cand = start(
        """\
        class Trainer:
            def __init__(self, model):
                self.model = model

            def train_epoch(self, loader):
                x, y = next(iter(loader))
                self.model(x)


        metrics = Trainer(net).train_epoch(train_dl)
        """
    )
    assert each(InlineCalls(), cand) == [
        dedent(
            """\
            class Trainer:
                def __init__(self, model):
                    self.model = model


            self = Trainer(net)
            loader = train_dl
            x, y = next(iter(loader))
            self.model(x)
            metrics = None
            """
        )
    ]
