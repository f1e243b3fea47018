"""simplify-expressions (passes/expressions.py): the exact program before and after its
units, and the folding of literal arithmetic and comprehensions it offers.
"""

from __future__ import annotations

import libcst as cst

from shrinkgpu.passes import SimplifyExpressions
from shrinkgpu.passes.expressions import fold, fold_comprehension
from shrinkgpu.syntax import Edit, Facts

from .helpers import after, dedent, each, each_over, line_of, start

# --------------------------------------------------------------------------------------
# SimplifyExpressions
# --------------------------------------------------------------------------------------

SIMPLE = """\
import sys
import torch

h = torch.ones(2, 4) * 2
print(act(fc(h)))
use(torch.zeros(3, dtype=torch.float64, device="cpu"))
use(1 if True else 2, a if 0 else b)
x = torch.empty(3).uniform_(0, 1) * 1
check(flag and not False)
for b in tqdm(loader, desc="train"):
    pass
n = 5
sys.exit(main())
"""


def test_simplify_expressions_level_0():
    # Applied together, an outer replacement hides the ones inside it.
    assert after(SimplifyExpressions(), start(SIMPLE), 0) == dedent(
        """\
        import sys
        import torch

        h = 0
        act(fc(h))
        torch.zeros(3, dtype=torch.float64, device="cpu")
        use(1, b)
        x = 0
        check(flag and True)
        for b in loader:
            pass
        n = 1
        main()
        """
    )


def _changed_line(before: str, after_: str) -> tuple[str, str]:
    old = [line for line in before.splitlines() if line not in after_.splitlines()]
    new = [line for line in after_.splitlines() if line not in before.splitlines()]
    assert len(old) == len(new) == 1, (old, new)
    return old[0], new[0]


def test_simplify_expressions_level_0_one_unit_at_a_time():
    changes = [_changed_line(SIMPLE, t) for t in each(SimplifyExpressions(), start(SIMPLE), 0)]
    assert changes == [
        ("h = torch.ones(2, 4) * 2", "h = 0"),  # a right-hand side nobody checks
        # not ``h = torch * 2``: a method call -> its receiver, but never a module object
        ("h = torch.ones(2, 4) * 2", "h = torch.ones(1, 4) * 2"),  # sizes -> 1
        ("h = torch.ones(2, 4) * 2", "h = torch.ones(2, 1) * 2"),
        ("h = torch.ones(2, 4) * 2", "h = torch.ones(2, 4) * 1"),
        ("print(act(fc(h)))", "act(fc(h))"),  # a wrapper call, at each depth
        ("print(act(fc(h)))", "print(fc(h))"),
        ("print(act(fc(h)))", "print(act(h))"),
        ('use(torch.zeros(3, dtype=torch.float64, device="cpu"))', 'torch.zeros(3, dtype=torch.float64, device="cpu")'),
        ('use(torch.zeros(3, dtype=torch.float64, device="cpu"))', 'use(torch.zeros(3, device="cpu"))'),  # a keyword
        ('use(torch.zeros(3, dtype=torch.float64, device="cpu"))', "use(torch.zeros(3, dtype=torch.float64))"),
        ('use(torch.zeros(3, dtype=torch.float64, device="cpu"))',
         'use(torch.zeros(1, dtype=torch.float64, device="cpu"))'),
        ("use(1 if True else 2, a if 0 else b)", "use(1, a if 0 else b)"),  # a constant condition
        ("use(1 if True else 2, a if 0 else b)", "use(1 if True else 2, b)"),
        ("use(1 if True else 2, a if 0 else b)", "use(1 if True else 1, a if 0 else b)"),
        ("x = torch.empty(3).uniform_(0, 1) * 1", "x = 0"),
        # not ``torch.empty(3) * 1``: uninitialised memory differs from run to run
        ("x = torch.empty(3).uniform_(0, 1) * 1", "x = torch.empty(1).uniform_(0, 1) * 1"),
        ("check(flag and not False)", "check(flag and True)"),
        ('for b in tqdm(loader, desc="train"):', "for b in loader:"),  # compound headers too
        ('for b in tqdm(loader, desc="train"):', "for b in tqdm(loader):"),
        ("n = 5", "n = 1"),
        ("sys.exit(main())", "main()"),
    ]


def test_simplify_expressions_leaves_numbers_in_literals_alone():
    # ``[0, 2, 4]`` is data; ``range(8)`` is a size.
    cand = start("t = torch.tensor([0, 2, 4])\nfor i in range(8):\n    pass\n")
    changed = [_changed_line("t = torch.tensor([0, 2, 4])\nfor i in range(8):\n    pass\n", t)
               for t in each(SimplifyExpressions(), cand, 0)]
    assert ("for i in range(8):", "for i in range(1):") in changed
    assert not any(new.startswith("t = torch.tensor([") for _, new in changed)


def test_simplify_expressions_level_1_offers_the_receiver_of_a_method_call():
    # One node, three alternatives, one level each: the right-hand side -> 0, the call
    # -> its argument, the call -> its receiver; ``sys.exit(...)`` never -> ``sys``.
    cand = start("import sys\nsys.exit(main())\ny = model.head(feats)\n")
    # Level 0 also offers dropping the unread ``y`` (the call stays); applied together
    # with ``y = 0``, the statement's new text wins.
    assert after(SimplifyExpressions(), cand, 0) == "import sys\nmain()\nmodel.head(feats)\n"
    assert after(SimplifyExpressions(), cand, 1) == "import sys\nsys.exit(main())\ny = feats\n"
    assert after(SimplifyExpressions(), cand, 2) == "import sys\nsys.exit(main())\ny = model\n"
    assert SimplifyExpressions().units(cand, 3) is None


def test_simplify_expressions_waits_for_a_rebase_after_other_edits():
    cand = start("x = f(g(1))\ny = 2\n")
    assert SimplifyExpressions().units(cand, 0) != []
    assert SimplifyExpressions().units(cand.with_edits([Edit("delete", 1)]), 0) == []


def test_simplify_expressions_leaves_the_seeding_call_alone():
    cand = start("import torch\ntorch.manual_seed(int(seed))\n", Facts(seed_sites=(("a.py", 2, True),)))
    assert SimplifyExpressions().units(cand, 0) == []
    assert SimplifyExpressions().units(start("import torch\ntorch.manual_seed(int(seed))\n"), 0) != []


def test_simplify_expressions_offers_one_alternative_per_node_and_level():
    cand = start("h = torch.ones(2, 4)\nout = act(fc(h))\nw = 1 if True else 2\nok = not False\n")
    for level in range(3):
        units = SimplifyExpressions().units(cand, level)
        if units is None:
            break
        nodes = [e.node for u in units for e in u]
        assert len(nodes) == len(set(nodes)), level


def test_simplify_expressions_keeps_calls_on_the_chain_to_a_seeding_call():
    src = "import torch\n\n\ndef seed_all(seed):\n    torch.manual_seed(seed)\n    return seed\n\n\ns = seed_all(1)\n"
    cand = start(src,
                 Facts(seed_sites=(("a.py", line_of(src, "s = seed_all"), False),
                                   ("a.py", line_of(src, "torch.manual_seed"), True))))
    for text in each_over(SimplifyExpressions(), cand, range(3)):
        assert "seed_all(1)" in text


def test_sequential_is_cut_to_the_layers_that_matter():
    src = "import torch.nn as nn\nnet = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))\n"
    changed = [t for t in each(SimplifyExpressions(), start(src))
               if "Sequential(nn.Linear(4, 8), nn.Linear(8, 2))" in t]
    assert changed == ["import torch.nn as nn\nnet = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))\n"]


def test_an_unread_assignment_keeps_its_call_and_loses_its_name():
    cand = start("import random\nlabel = random.randint(0, 1)\nx = f()\nprint(x)\n")
    outs = each(SimplifyExpressions(), cand)
    assert "import random\nrandom.randint(0, 1)\nx = f()\nprint(x)\n" in outs
    assert not any(o.endswith("f()\nprint(x)\n") and "x = f()" not in o for o in outs)


def test_an_unread_display_keeps_its_calls_in_order():
    cand = start('metrics = {"loss": Trainer(m).train_epoch(dl), "epoch": 3, "val": evaluate(m)}\nprint(1)\n')
    assert "Trainer(m).train_epoch(dl)\nevaluate(m)\nprint(1)\n" in each(SimplifyExpressions(), cand)
    # an attribute read or an operator could raise: the display stays whole
    for src in ("out = [f(x), y.z]\n", "out = (f(x), 1 / n)\n", "out = [f(x), *rest]\n", "out = [1, 2]\nprint(out)\n"):
        assert all(o.startswith("out = ") for o in each(SimplifyExpressions(), start(src)))


def test_simplify_expressions_lifts_an_operand_out_of_an_operation():
    cand = start("import torch\nx = 0 + 0.3 * torch.randn(4, 3)\nx.view(-1)\n")
    outs = [each(SimplifyExpressions(), cand, level) for level in range(3)]
    flat = [o for level in outs for o in level]
    assert "import torch\nx = 0.3 * torch.randn(4, 3)\nx.view(-1)\n" in flat
    assert "import torch\nx = 0 + torch.randn(4, 3)\nx.view(-1)\n" in flat


def test_simplify_expressions_splits_a_tuple_assignment_with_unread_names():
    cand = start("x, y = a[:16], b[:16]\nwin, n = x.view(3, 4), 5\nprint(x)\n")
    flat = each(SimplifyExpressions(), cand, 0)
    assert "x = a[:16]\nwin, n = x.view(3, 4), 5\nprint(x)\n" in flat
    assert "x, y = a[:16], b[:16]\nx.view(3, 4)\nprint(x)\n" in flat
    # a name assigned to itself is no assignment
    cand = start("pts, t = pts, tensor(xs)\nf(pts, t)\n")
    assert "t = tensor(xs)\nf(pts, t)\n" in each(SimplifyExpressions(), cand, 0)
    # reading one's own old value is fine; a swap is not two assignments
    cand = start("t, n, labels = padded, 0, labels\nf(t)\n")
    assert "t = padded\nf(t)\n" in each(SimplifyExpressions(), cand, 0)
    swap = start("a, b, c = b, a, 0\nf(a, b)\n")
    assert not SimplifyExpressions().units(swap, 0)  # not even ``a = b``: nothing to split


def test_simplify_expressions_takes_the_one_element_of_a_wrapped_list():
    cand = start("train_set = ConcatDataset([vendor])\nloader = DataLoader(train_set)\n")
    assert "train_set = vendor\nloader = DataLoader(train_set)\n" in each(SimplifyExpressions(), cand, 0) + each(
        SimplifyExpressions(), cand, 1
    )


def test_simplify_expressions_splits_a_nested_tuple_assignment():
    cand = start("step, (x, y) = (0, (a[:2], b[:2]))\nf(x, y)\n")
    assert each(SimplifyExpressions(), cand, 0)[0] == "x = a[:2]\ny = b[:2]\nf(x, y)\n"


def test_simplify_expressions_offers_smaller_sizes_the_program_already_uses():
    cand = start("xs = torch.randn(48)\nys = xs[:32]\n")
    flat = each_over(SimplifyExpressions(), cand, range(6))
    assert "xs = torch.randn(32)\nys = xs[:32]\n" in flat  # 32 appears in the program
    assert "xs = torch.randn(48)\nys = xs\n" in flat  # the slice dropped


def test_simplify_expressions_splits_a_parenthesised_tuple_assignment():
    cand = start("x, y = (f(a), g(b))\nh(x, y)\n")
    assert "x = f(a)\ny = g(b)\nh(x, y)\n" in each(SimplifyExpressions(), cand, 0)


def test_simplify_expressions_picks_an_entry_out_of_a_dict_literal():
    cand = start('ids = {"input_ids": torch.randint(1, 50, (8, 12)), "n": n}["input_ids"]\nf(ids)\n')
    flat = each_over(SimplifyExpressions(), cand, range(3))
    assert 'ids = torch.randint(1, 50, (8, 12))\nf(ids)\n' in flat
    # another entry does work of its own: it would be lost
    cand = start('ids = {"a": f(x), "b": g(y)}["a"]\nh(ids)\n')
    assert not any(o.startswith("ids = f(x)\n") for o in each_over(SimplifyExpressions(), cand, range(3)))


# --------------------------------------------------------------------------------------
# fold and fold_comprehension
# --------------------------------------------------------------------------------------

def test_fold_evaluates_only_literal_arithmetic():
    assert fold(cst.parse_expression("16 + 1")) == "17"
    assert fold(cst.parse_expression("0 != 0")) == "False"
    assert fold(cst.parse_expression("len(['a', 'b', 'c'])")) == "3"
    for text in ("x + 1", "2 ** 100", "f(1) + 2", "1.0 / 3", "7"):
        assert fold(cst.parse_expression(text)) is None, text


def test_a_comprehension_over_literals_folds_to_its_value():
    def folded(text):
        return fold_comprehension(cst.parse_expression(text))

    assert (folded('{k: v for k, v in {"name": "tcn", "hidden": [32], "k": 5}.items() if k != "name"}')
            == "{'hidden': [32], 'k': 5}")
    assert folded("[x * 2 for x in [1, 2, 3]]") == "[2, 4, 6]"
    assert folded("[f(x) for x in [1, 2]]") is None  # a call
    assert folded("[x for x in data]") is None  # a name the comprehension does not bind
    assert folded("[x for x in ().__class__.__subclasses__()]") is None
    cand = start('make(**{k: v for k, v in {"name": "tcn", "k": 5}.items() if k != "name"})\n')
    assert "make(**{'k': 5})\n" in each(SimplifyExpressions(), cand, 0)


def test_a_call_around_the_failing_call_is_offered_as_that_call():
    # ``F.mse_loss(step(x), y)``: the compiled call raises before the loss runs
    cand = start("import torch.nn.functional as F\nF.mse_loss(step(x), y[0])\nprint(f(a), g(b))\n")
    found = {line for text in each_over(SimplifyExpressions(), cand, range(4)) for line in text.splitlines()[1:]}
    assert "step(x)" in found
    assert {"f(a)", "g(b)"} <= found


def test_a_stack_of_identical_blocks_is_offered_as_one_block():
    """Issue 23: a ``Sequential`` of identical blocks becomes one block, and the count a
    ``ModuleList`` comprehension repeats becomes 1."""
    sequential = start("import torch.nn as nn\nblocks = nn.Sequential(Block(4), Block(4), Block(4))\ny = blocks(x)\n")
    offered = {text.splitlines()[1] for text in each_over(SimplifyExpressions(), sequential, (0, 1))}
    assert "blocks = Block(4)" in offered
    listed = start("import torch.nn as nn\nn_layers = 6\n"
                   "blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(n_layers)])\nfor b in blocks:\n"
                   "    x = b(x)\n")
    assert "n_layers = 1" in {text.splitlines()[1] for text in each(SimplifyExpressions(), listed, 0)}


def test_a_splatted_dictionary_literal_is_offered_as_keywords():
    cand = start('import torch\nmodel(x, **{"input_ids": 0, "mask": m}, labels=y)\nf(**{"not ok": 1})\n'
                 'g(**{"a": 1}, a=2)\n')
    offered = each_over(SimplifyExpressions(), cand, (0, 1, 2))
    # the keywords where the splat was; a key that is no identifier, or is given twice, stays a splat
    assert [t.splitlines()[1] for t in offered].count("model(x, input_ids=0, mask=m, labels=y)") == 1
    assert not any(line.startswith(("f(not", "g(a=1")) for t in offered for line in t.splitlines()[2:])


def test_a_comprehension_over_a_range_of_one_value_is_its_one_element():
    cand = start("import torch\ny = torch.cat([featurize(xs[i], i=i, n=o.i) for i in range(0, 1, 1)])\n"
                 "z = [f(j) for j in range(2)]\n")
    offered = [t.splitlines()[1] for t in each(SimplifyExpressions(), cand, 0)]
    assert "y = torch.cat([featurize(xs[0], i=0, n=o.i)])" in offered
    assert not any(t.splitlines()[2].startswith("z = [f(0)") for t in each(SimplifyExpressions(), cand, 0))


def _offered(cand, levels=(0, 1, 2, 3)):
    return {line for text in each_over(SimplifyExpressions(), cand, levels) for line in text.splitlines()}


def test_a_config_built_from_a_namespace_of_parsed_arguments_is_offered_with_keywords():
    # what argparse-values leaves of ``Config(**{k.replace("-", "_"): v for k, v in vars(p.parse_args()).items()})``
    cand = start("import argparse\ncfg = Config(**{k: v for k, v in vars(argparse.Namespace(d_model=96, "
                 "heads=4)).items()})\n")
    offered = _offered(cand)
    # the comprehension that copies the mapping is the mapping; the namespace's values a dictionary
    assert "cfg = Config(**vars(argparse.Namespace(d_model=96, heads=4)))" in offered
    assert "cfg = Config(**{k: v for k, v in {'d_model': 96, 'heads': 4}.items()})" in offered
    # (and that dictionary literal, once a rebase has it, is offered as keywords)
    assert "cfg = Config(d_model=96, heads=4)" in _offered(start("cfg = Config(**{'d_model': 96, 'heads': 4})\n"))
    # a comprehension that changes keys or values, or filters, is no copy; a namespace
    # given a positional argument is no namespace of keywords
    for src in ("d = {v: k for k, v in e.items()}\n", "d = {k: f(v) for k, v in e.items()}\n",
                "d = {k: v for k, v in e.items() if k}\n", "d = vars(ns.Namespace(x))\n"):
        assert not any(o.startswith("d = e") or "{'" in o for o in _offered(start(src))), src


def test_a_lambda_called_in_place_is_offered_as_its_body_with_the_arguments_written_in():
    cand = start("out = (lambda p: beam_search(model, p, 4))(gold[:, :7])\n"
                 "g, q = (lambda p: decode(model))(torch.zeros(1, 1))\n"
                 "twice = (lambda a: a + a)(f())\n")
    offered = _offered(cand)
    assert "out = beam_search(model, gold[:, :7], 4)" in offered
    assert "g, q = decode(model)" in offered  # an unread parameter: its argument goes
    # a parameter read twice would evaluate its argument twice
    assert not any(o.startswith("twice = f() + f()") or o.startswith("twice = (f()) +") for o in offered)


def test_an_unread_tuple_target_of_a_call_goes_and_the_call_stays():
    cand = start("g, p = decode(model)\nx, y = f()\nprint(x)\nu, v = 1, 2\n")
    outs = each(SimplifyExpressions(), cand)
    assert "decode(model)\nx, y = f()\nprint(x)\nu, v = 1, 2\n" in outs
    # ``x`` is read: the unpacking stays; a display is no call
    assert not any("\nf()\n" in o for o in outs)
    assert not any(o.endswith("print(x)\n1, 2\n") for o in outs)


def test_the_first_item_of_a_container_of_literal_elements_is_offered_for_next_iter():
    cand = start("conv = next(iter(nn.ModuleList([GCNConv(1), Sage()])))\n"
                 "layer = next(iter(nn.Sequential(nn.Linear(2, 3), nn.ReLU())))\n"
                 "x = next(iter([a, b]))\n"
                 "y = next(iter(loader))\n"
                 "z = next(iter(nn.ModuleList(layers)))\n")
    offered = _offered(cand)
    assert "conv = GCNConv(1)" in offered and "layer = nn.Linear(2, 3)" in offered and "x = a" in offered
    # a loader's or a variable's first item is not written in the program
    assert not any(o.startswith(("y = loader", "z = layers")) for o in offered)


def test_keywords_that_let_a_rerun_find_its_work_done_stay():
    # every candidate runs in a clean directory, where ``exist_ok=True`` never matters;
    # without it the result fails otherwise the second time it runs
    text = ("os.makedirs('runs/a', exist_ok=True)\nPath('b').mkdir(parents=True, exist_ok=True)\n"
            "shutil.copytree('c', 'd', dirs_exist_ok=True)\nPath('e').unlink(missing_ok=True)\n"
            "shutil.rmtree('f', ignore_errors=True)\nload('g', weights_only=True)\n")
    changed = [_changed_line(text, t) for t in each(SimplifyExpressions(), start(text), 0)]
    assert ("load('g', weights_only=True)", "load('g')") in changed
    assert ("Path('b').mkdir(parents=True, exist_ok=True)", "Path('b').mkdir(exist_ok=True)") in changed
    # (the call itself may go, as any call may: then what needs the directory fails)
    calls = ("os.makedirs(", "Path('b').mkdir(", "shutil.copytree(", "Path('e').unlink(", "shutil.rmtree(")
    kept_calls = [(old, new) for old, new in changed if new.startswith(calls)]
    assert len(kept_calls) == 1  # parents=True may go
    assert not any("_ok" in old and "_ok" not in new or "ignore_errors" in old and "ignore_errors" not in new
                   for old, new in kept_calls), kept_calls


# -- stand-ins: the failing call without the receiver and the arguments it never uses --------
def test_a_store_nothing_reads_back_is_offered_as_its_value():
    text = ("class Lit(LightningModule):\n    def __init__(self, n):\n        self.lr = f(0.1)\n"
            "        self.train_acc = Accuracy(num_classes=n)\n        self.net = Net(n)\n"
            "    def forward(self, x):\n        return self.net(x) * self.lr\n")
    outs = each(SimplifyExpressions(), start(text))
    assert text.replace("self.train_acc = Accuracy", "Accuracy") in outs
    # ``net`` and ``lr`` are read in ``forward``: their stores stay
    assert not any("        Net(n)\n" in o or "        f(0.1)\n" in o for o in outs)


def test_a_call_that_cannot_take_its_arguments_is_offered_as_the_calls_in_them():
    text = ("class Trainer:\n    pass\n\n\nmodel = Net()\n"
            "Trainer(model, SGD(model.parameters()), nn.CrossEntropyLoss(), callbacks=[Metrics(4), 3])\n")
    lifted = ("class Trainer:\n    pass\n\n\nmodel = Net()\n"
              "SGD(model.parameters())\nnn.CrossEntropyLoss()\nMetrics(4)\n")
    assert lifted in each(SimplifyExpressions(), start(text))
    # a class that takes them: the call may run, and what it does with them stays
    taking = text.replace("    pass\n", "    def __init__(self, model, opt, loss, callbacks=()):\n        pass\n")
    assert not any(o.endswith("nn.CrossEntropyLoss()\nMetrics(4)\n")
                   for o in each(SimplifyExpressions(), start(taking)))
    # an argument that could raise as it is read (``cfg.loss``) would be dropped: not offered
    reading = text.replace("nn.CrossEntropyLoss()", "cfg.loss")
    assert not any(o.endswith("Metrics(4)\n") for o in each(SimplifyExpressions(), start(reading)))


def test_a_name_used_as_an_object_gets_no_literal_in_its_place():
    cand = start("self = LightningModule()\nself.acc = Accuracy()\nn = len(rows)\nx = torch.zeros(n)\n")
    outs = each(SimplifyExpressions(), cand)
    assert "self = LightningModule()\nself.acc = Accuracy()\nn = 0\nx = torch.zeros(n)\n" in outs
    assert not any(o.startswith("self = 0") for o in outs)
