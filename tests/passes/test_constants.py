"""argparse-to-namespace, propagate-constants and scalarize-attributes
(passes/constants.py): the exact program before and after their units.
"""

from __future__ import annotations

import pytest

from shrinkgpu.passes import ArgparseToNamespace, PropagateConstants, ScalarizeAttributes
from shrinkgpu.syntax import Facts, ParseRecord

from .helpers import after, dedent, each, line_of, start

# --------------------------------------------------------------------------------------
# ArgparseToNamespace
# --------------------------------------------------------------------------------------

def test_argparse_parse_args_becomes_the_namespace_it_returned():
    src = """\
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--name", default="run")
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    print(args.lr, args.epochs)
    """
    record = ParseRecord("a.py", line_of(src, "args = "), (("lr", "0.1"), ("name", "'run'"), ("epochs", "3")))
    cand = start(src, Facts(parses=(record,)))
    # Only attributes the program reads; the parser goes in the same unit.
    assert after(ArgparseToNamespace(), cand) == dedent(
        """\
        import argparse
        args = argparse.Namespace(lr=0.1, epochs=3)
        print(args.lr, args.epochs)
        """
    )


def test_argparse_build_parser_parse_args_deletes_the_builder():
    src = """\
    import argparse


    def build_parser():
        p = argparse.ArgumentParser()
        p.add_argument("--lr", type=float, default=0.1)
        return p


    def main():
        args = build_parser().parse_args()
        print(args.lr)
    """
    cand = start(src, Facts(parses=(ParseRecord("a.py", line_of(src, "args = "), (("lr", "0.1"),)),)))
    assert after(ArgparseToNamespace(), cand) == dedent(
        """\
        import argparse


        def main():
            args = argparse.Namespace(lr=0.1)
            print(args.lr)
        """
    )


def test_argparse_parse_known_args_returns_a_pair_and_counts_getattr_reads():
    src = """\
    from argparse import ArgumentParser

    parser = ArgumentParser()
    parser.add_argument("--lr", type=float, default=0.1)
    args, rest = parser.parse_known_args()
    print(args.lr, getattr(args, "seed"))
    """
    values = (("lr", "0.1"), ("seed", "1"), ("out", None))  # ``out`` is never read
    cand = start(src, Facts(parses=(ParseRecord("a.py", line_of(src, "args, rest"), values, known_args=True),)))
    # ``argparse`` itself is not bound here, so the namespace names it by ``__import__``;
    # the import of ``ArgumentParser`` has no reader left and goes with the parser.
    assert after(ArgparseToNamespace(), cand) == dedent(
        """\
        args, rest = (__import__("argparse").Namespace(lr=0.1, seed=1), [])
        print(args.lr, getattr(args, "seed"))
        """
    )


def test_argparse_leaves_a_parse_whose_values_are_not_literals():
    src = """\
    import argparse
    parser = argparse.ArgumentParser()
    parser.add_argument("--path", type=Path)
    args = parser.parse_args()
    print(args.path)
    """
    cand = start(src, Facts(parses=(ParseRecord("a.py", line_of(src, "args = "), (("path", None),)),)))
    assert ArgparseToNamespace().units(cand, 0) == []


def test_argparse_without_recorded_parses_proposes_nothing():
    src = "import argparse\nargs = argparse.ArgumentParser().parse_args()\n"
    assert ArgparseToNamespace().units(start(src), 0) == []
    assert ArgparseToNamespace().units(start(src), 1) is None


# --------------------------------------------------------------------------------------
# PropagateConstants
# --------------------------------------------------------------------------------------

def test_propagate_constants_numbers_short_strings_tuples_and_copies():
    cand = start(
        """\
        import torch
        BATCH = 16
        NEG = -2
        NAME = "relu"
        SHAPE = (2, 3)
        FLAG = True
        ALPHABET = "ACDEFGHIKLMNPQRSTVWY"
        SIZES = [3, 4]
        x = torch.randn(BATCH, SHAPE[0])
        y = x * NEG
        loader = train_loader
        for b in loader:
            act = getattr(torch, NAME)
        print(len(ALPHABET), SIZES, FLAG)
        """
    )
    # A long string stays behind its name, and a list is mutable: both stay.
    assert after(PropagateConstants(), cand) == dedent(
        """\
        import torch
        ALPHABET = "ACDEFGHIKLMNPQRSTVWY"
        SIZES = [3, 4]
        x = torch.randn(16, 2)
        y = x * (-2)
        for b in train_loader:
            act = getattr(torch, "relu")
        print(len(ALPHABET), SIZES, True)
        """
    )
    assert len(PropagateConstants().units(cand, 0)) == 6  # one unit per binding


def test_propagate_constants_one_unit_replaces_every_read_and_the_binding():
    cand = start(
        """\
        N = 3
        class A:
            n = N
            def f(self):
                return [N for _ in range(N)]
        """
    )
    assert each(PropagateConstants(), cand) == [
        "class A:\n    n = 3\n    def f(self):\n        return [3 for _ in range(3)]\n"
    ]


def test_propagate_constants_into_namespace_attributes():
    cand = start(
        """\
        import argparse

        args = argparse.Namespace(lr=0.1, epochs=3, name="a")
        opt = make(lr=args.lr)
        for e in range(args.epochs):
            pass
        """
    )
    # Nothing reads ``argparse`` any more: its import goes in the same unit.
    assert after(PropagateConstants(), cand) == dedent(
        """\
        opt = make(lr=0.1)
        for e in range(3):
            pass
        """
    )


def test_propagate_constants_reads_a_plain_config_class_made_without_arguments():
    # What a ``@dataclass`` config is once strip-decorators removed the decorator, and
    # how many scripts write a config by hand; a read of a non-literal field stays.
    cand = start(
        """\
        class Config:
            vocab: int = 50
            dim = 16
            tags = make_tags()


        cfg = Config()
        emb = Embedding(cfg.vocab, cfg.dim)
        print(cfg.tags)
        """
    )
    assert after(PropagateConstants(), cand) == dedent(
        """\
        class Config:
            vocab: int = 50
            dim = 16
            tags = make_tags()


        cfg = Config()
        emb = Embedding(50, 16)
        print(cfg.tags)
        """
    )


def test_propagate_constants_reads_a_config_class_used_as_a_namespace():
    cand = start(
        """\
        class Config:
            vocab = 50
            dim = 16


        emb = Embedding(Config.vocab, Config.dim)
        """
    )
    # The blank lines before the next statement are its own (whitespace, not tokens).
    assert after(PropagateConstants(), cand) == "\n\nemb = Embedding(50, 16)\n"


@pytest.mark.parametrize(
    "src",
    [
        # a config class with a method or a base is more than its class attributes
        "class C:\n    n = 1\n    def f(self):\n        return 2\nc = C()\nprint(c.n)\n",
        "class C(Base):\n    n = 1\nc = C()\nprint(c.n)\n",
        # the class body binds the name again, or the class is handed on
        "class C:\n    n = 1\n    n = f()\nc = C()\nprint(c.n)\n",
        "class C:\n    n = 1\n    n += 1\nprint(C.n)\n",
        "class C:\n    n = 1\nsetattr(C, 'n', 2)\nprint(C.n)\n",
        "class C:\n    n = 1\ntweak(C)\nprint(C.n)\n",
        "class C:\n    n = 1\ndel C.n\n",
        # the class attribute is written, or the instance's
        "class C:\n    n = 1\nC.n = 2\nc = C()\nprint(c.n)\n",
        "class C:\n    n = 1\nc = C()\nc.n = 2\nprint(c.n)\n",
        # an attribute is written
        "import argparse\nargs = argparse.Namespace(lr=0.1)\nargs.lr = 0.5\nopt = make(lr=args.lr)\n",
        # an attribute the namespace does not have
        "import argparse\nargs = argparse.Namespace(lr=0.1)\nopt = make(lr=args.momentum)\n",
        # bound twice
        "n = 1\nn = 2\nprint(n)\n",
        # augmented
        "X = 0\nX += 1\nprint(X)\n",
        # not a constant
        "x = f()\nprint(x)\n",
        # read by nothing
        "x = 1\n",
    ],
)
def test_propagate_constants_leaves_what_it_cannot_replace_safely(src):
    assert PropagateConstants().units(start(src), 0) == []


def test_propagate_constants_replaces_known_fields_of_a_namespace_that_escapes():
    # ``log(args)`` needs the object, so it stays; ``args.lr`` still becomes its value.
    cand = start("import argparse\nargs = argparse.Namespace(lr=0.1)\nopt = make(lr=args.lr)\nlog(args)\n")
    assert after(PropagateConstants(), cand) == (
        "import argparse\nargs = argparse.Namespace(lr=0.1)\nopt = make(lr=0.1)\nlog(args)\n"
    )


def test_propagate_constants_leaves_a_name_an_f_string_reads():
    # ``f"act={'relu'}"`` would nest quotes before Python 3.12: no unit at all, not even
    # for the plain read beside it (the binding could not go)
    cand = start('NAME = "relu"\nprint(f"act={NAME}")\nprint(NAME)\n')
    assert not PropagateConstants().units(cand, 0)


def test_propagate_constants_never_replaces_a_del_target():
    # ``del 3`` does not compile: a name that is deleted is left alone
    cand = start("N = 3\nprint(N)\ndel N\n")
    assert not PropagateConstants().units(cand, 0)


def test_propagate_constants_indexes_a_tuple_where_it_is_subscripted():
    cand = start("GRID = (16, 8, 4)\nn = GRID[0] * GRID[-1]\nshape = GRID\n")
    assert after(PropagateConstants(), cand) == "n = 16 * 4\nshape = (16, 8, 4)\n"


def test_propagate_constants_reads_sizes_off_a_tensor_factory():
    cand = start("import torch\np = 2.0 * torch.randn(4, 32)\nq = torch.randn(p.shape[1]) + p.size(-2)\n")
    assert each(PropagateConstants(), cand) == [
        # the draw stays (the random stream may matter) ...
        "import torch\np = 2.0 * torch.randn(4, 32)\nq = torch.randn(32) + 4\n",
        # ... or goes, now that nothing reads it
        "import torch\nq = torch.randn(32) + 4\n",
    ]
    # a tensor that is also read whole keeps its binding; only the size is replaced
    cand = start("import torch\nr = torch.randint(0, 3, (5,))\nf(r.shape[0], r)\n")
    assert each(PropagateConstants(), cand) == ["import torch\nr = torch.randint(0, 3, (5,))\nf(5, r)\n"]
    # sizes that are not literals, or an index out of range: nothing
    for src in ("import torch\np = torch.randn(n, 3)\nf(p.shape[0])\n",
                "import torch\np = torch.randn(2, 3)\nf(p.shape[2])\n"):
        assert PropagateConstants().units(start(src), 0) == []


def test_a_registry_read_with_a_key_the_program_spells_becomes_the_entry():
    source = dedent("""\
        import torch
        MODELS = {"tcn": torch.nn.Conv1d, "mlp": torch.nn.Linear}
        model = MODELS["tcn"](3, 4, 5)
        """)
    assert each(PropagateConstants(), start(source), 0) == ["import torch\nmodel = torch.nn.Conv1d(3, 4, 5)\n"]
    mutated = source + 'MODELS["gru"] = torch.nn.GRU\n'
    assert not PropagateConstants().units(start(mutated), 0)


def test_a_registry_of_the_users_own_classes_becomes_the_class():
    source = dedent("""\
        class TCN:
            pass


        class MLP:
            pass


        MODELS = {"tcn": TCN, "mlp": MLP}
        model = MODELS['tcn'](n_classes=6)
        """)
    # the class only the registry named goes with it
    assert each(PropagateConstants(), start(source), 0) == ["class TCN:\n    pass\nmodel = TCN(n_classes=6)\n"]


# --------------------------------------------------------------------------------------
# ScalarizeAttributes
# --------------------------------------------------------------------------------------

def test_scalarize_attributes_of_an_object_used_only_through_them():
    cand = start(
        """\
        import torch.nn as nn
        model = nn.Module()
        model.fc = nn.Linear(4, 2)
        out = model.fc(x)
        """
    )
    assert after(ScalarizeAttributes(), cand) == dedent(
        """\
        import torch.nn as nn
        fc = nn.Linear(4, 2)
        out = fc(x)
        """
    )


def test_scalarize_attributes_leaves_objects_that_are_used_whole_or_collide():
    used_whole = "import torch.nn as nn\nm = nn.Module()\nm.fc = nn.Linear(4, 2)\nopt(m)\n"
    collides = "import torch.nn as nn\nfc = 1\nm_fc = 2\nm = nn.Module()\nm.fc = nn.Linear(4, 2)\nm.fc(x)\n"
    with_args = "m = Box(3)\nm.fc = 1\nprint(m.fc)\n"
    # an attribute read but never set on the object (its class's, or its __init__'s):
    # a plain name would be unbound
    class_attribute = "class C:\n    model = 1\n\n\ncfg = C()\ncfg = cfg.model\n"
    partly = "m = nn.Module()\nm.fc = nn.Linear(4, 2)\nm.fc(m.extra)\n"
    for src in (used_whole, collides, with_args, class_attribute, partly):
        assert ScalarizeAttributes().units(start(src), 0) == []


def test_scalarize_attributes_prefixes_a_name_the_program_already_uses():
    cand = start("ds = Dataset()\nds.x = f()\nds.y = g()\nx, y = ds.x[:4], ds.y[:4]\n")
    assert after(ScalarizeAttributes(), cand) == "ds_x = f()\nds_y = g()\nx, y = ds_x[:4], ds_y[:4]\n"
