"""hoist-then, hoist-else, try-to-body and unwrap-with (passes/branches.py): the exact
program before and after their units.
"""

from __future__ import annotations

from shrinkgpu.passes import HoistElse, HoistThen, TryToBody, UnwrapWith
from shrinkgpu.syntax import Facts

from .helpers import after, each, line_of, start

BRANCHES = """\
import torch
if args.cuda:
    dev = "cuda"  # gpu
elif args.mps:
    dev = "mps"
else:
    dev = "cpu"
try:
    x = torch.load(path)
except FileNotFoundError:
    x = torch.zeros(3)
finally:
    print("done")
with torch.no_grad():
    y = x * 2  # eval
"""


def test_hoist_then_offers_each_if_and_elif():
    assert each(HoistThen(), start(BRANCHES)) == [
        BRANCHES.replace(
            'if args.cuda:\n    dev = "cuda"  # gpu\nelif args.mps:\n    dev = "mps"\nelse:\n    dev = "cpu"\n',
            'dev = "cuda"  # gpu\n',
        ),
        BRANCHES.replace('elif args.mps:\n    dev = "mps"\nelse:\n    dev = "cpu"\n', 'else:\n    dev = "mps"\n'),
    ]


def test_hoist_else_offers_each_if_and_elif_with_an_else():
    assert each(HoistElse(), start(BRANCHES)) == [
        BRANCHES.replace('if args.cuda:\n    dev = "cuda"  # gpu\nelif', "if"),
        BRANCHES.replace('elif args.mps:\n    dev = "mps"\nelse:', "else:"),
    ]
    assert HoistElse().units(start("if a:\n    b = 1\n"), 0) == []


def test_try_to_body_keeps_the_path_without_an_exception():
    assert after(TryToBody(), start(BRANCHES)) == BRANCHES.replace(
        'try:\n    x = torch.load(path)\nexcept FileNotFoundError:\n    x = torch.zeros(3)\nfinally:\n'
        '    print("done")\n',
        'x = torch.load(path)\nprint("done")\n',
    )


def test_unwrap_with_keeps_the_body():
    assert after(UnwrapWith(), start(BRANCHES)) == BRANCHES.replace(
        "with torch.no_grad():\n    y = x * 2  # eval\n", "y = x * 2  # eval\n"
    )


def test_branch_passes_do_not_offer_an_already_hoisted_statement():
    cand = start(BRANCHES)
    done = cand.with_edits(e for p in (HoistThen(), TryToBody(), UnwrapWith()) for u in p.units(cand, 0) for e in u)
    assert done.files["a.py"] == ('import torch\ndev = "cuda"  # gpu\nx = torch.load(path)\nprint("done")\n'
                                  'y = x * 2  # eval\n')
    for p in (HoistThen(), HoistElse(), TryToBody(), UnwrapWith()):
        assert p.units(done, 0) == []


def test_branch_passes_keep_a_protected_statement_in_the_branch_that_survives():
    src = """\
    import torch
    if DEBUG:
        print("debug")
    else:
        torch.manual_seed(0)
    try:
        torch.manual_seed(1)
    except RuntimeError:
        pass
    try:
        x = 1
    except RuntimeError:
        torch.manual_seed(2)
    """
    sites = tuple(("a.py", line_of(src, f"torch.manual_seed({n})"), True) for n in range(3))
    cand = start(src, Facts(seed_sites=sites))
    assert HoistThen().units(cand, 0) == []  # would lose ``manual_seed(0)``
    assert [u[0].stmt for u in HoistElse().units(cand, 0)] == [1]
    assert [u[0].stmt for u in TryToBody().units(cand, 0)] == [4]  # not the one with a seeding handler
