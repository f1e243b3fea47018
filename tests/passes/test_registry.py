"""All the registered passes together (passes/__init__.py): no unit of any pass loses a
seeding call, and needle tests: a generated program reduced by the tiers of ``PASSES``
with an in-process oracle must shrink to exactly the known small program.

No processes and no torch: the programs mention torch only in their text, and the
needle oracle runs candidates with ``exec`` against a fake ``fail``.
"""

from __future__ import annotations

import builtins
import random
import textwrap
import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shrinkgpu.core import Verdict, reduce_to_fixpoint
from shrinkgpu.passes import PASSES
from shrinkgpu.syntax import Candidate, Facts, Program

from .helpers import line_of, start

# --------------------------------------------------------------------------------------
# No pass removes or rewrites a protected seeding statement
# --------------------------------------------------------------------------------------

SEEDED = """\
import random
import torch


def seed_all(seed):
    random.seed(seed)
    torch.manual_seed(seed)  # the run's random stream
    return seed


def main():
    if DEBUG:
        print("debug")
    else:
        torch.manual_seed(0)
    with torch.no_grad():
        x = torch.randn(3)
    try:
        s = seed_all(1)
    except ValueError:
        s = 0
    y = x[5]


main()
"""


SEEDED_FACTS = Facts(
    stack=(("a.py", line_of(SEEDED, "main()")), ("a.py", line_of(SEEDED, "y = x[5]"))),
    seed_sites=(
        ("a.py", line_of(SEEDED, "main()"), False),
        ("a.py", line_of(SEEDED, "s = seed_all(1)"), False),
        ("a.py", line_of(SEEDED, "torch.manual_seed(seed)"), True),
        ("a.py", line_of(SEEDED, "torch.manual_seed(0)"), True),
    ),
)


def _every_pass():
    return [p for tier in PASSES for p in tier]


@pytest.mark.parametrize("p", _every_pass(), ids=lambda p: p.name)
def test_no_unit_of_any_pass_loses_a_seeding_call(p):
    cand = start(SEEDED, SEEDED_FACTS)
    deps = cand.program.deps
    seeding = {deps.statement_at("a.py", line_of(SEEDED, f"torch.manual_seed({arg})")) for arg in ("seed", "0")}
    assert cand.program.seeding == seeding
    for level in range(6):
        units = p.units(cand, level)
        if units is None:
            break
        for unit in units:
            text = p.apply(cand, [unit]).files["a.py"]
            assert "    torch.manual_seed(seed)  # the run's random stream\n" in text, (level, unit)
            assert "torch.manual_seed(0)\n" in text, (level, unit)
            # Nothing touches the seeding statements themselves, except inlining, which
            # pastes them whole.
            touched = {e.stmt for e in unit if e.op != "replace"} | {
                e.stmt for e in unit if e.op == "replace" and p.name != "inline-calls"
            }
            assert not touched & seeding, (level, unit)


# --------------------------------------------------------------------------------------
# Needles: generated programs that must shrink to exactly one known small program
# --------------------------------------------------------------------------------------

FAILING_LINE = "fail(value)"


def run(files: dict[str, str], main: str, fail) -> None:
    """Run ``main`` with ``fail`` defined and the program's other files importable as
    modules, all in this process (``import`` is routed to the candidate's own files)."""
    loaded: dict[str, types.ModuleType] = {}

    def importer(name, globals=None, locals=None, fromlist=(), level=0):
        path = name.replace(".", "/") + ".py"
        if level == 0 and path in files and path != main:
            if name not in loaded:
                module = types.ModuleType(name)
                module.__dict__["__builtins__"] = own_builtins
                loaded[name] = module
                exec(compile(files[path], path, "exec"), module.__dict__)
            return loaded[name]
        return builtins.__import__(name, globals, locals, fromlist, level)

    own_builtins = dict(vars(builtins), __import__=importer)
    namespace = {"__builtins__": own_builtins, "__name__": "__main__", "fail": fail}
    exec(compile(files[main], main, "exec"), namespace)


def oracle(expected_value):
    """REPRODUCED when the failing line is there, every file compiles, the program runs
    without an error, and it calls ``fail`` exactly once with the value the original
    computes."""

    def test(cand: Candidate) -> Verdict:
        files = cand.files
        if FAILING_LINE not in files["a.py"]:
            return Verdict.PASSED
        try:
            for path, src in files.items():
                compile(src, path, "exec")
        except SyntaxError:
            return Verdict.INVALID
        seen: list = []
        try:
            run(files, "a.py", seen.append)
        except Exception:
            return Verdict.OTHER_ERROR
        return Verdict.REPRODUCED if seen == [expected_value] else Verdict.PASSED

    return test


def rebase(cand: Candidate) -> Candidate:
    """What the reducer does after a pass improved the program: the accepted text becomes
    the new original."""
    if not cand.edits:
        return cand
    return Program(cand.files, cand.program.main).initial()


def reduce(src: str, expected_value, **modules: str) -> str:
    cand = start(src, **modules)
    test = oracle(expected_value)
    assert test(cand) is Verdict.REPRODUCED
    outcome = reduce_to_fixpoint(cand, PASSES, test, lambda c: c.size, normalize=rebase)
    assert outcome.stopped is None
    assert test(outcome.best) is Verdict.REPRODUCED
    assert list(outcome.best.files) == ["a.py"]
    # Blank lines at the top are the surviving statement's own leading lines: free in
    # tokens, and not what this test is about.
    return outcome.best.files["a.py"].lstrip("\n")


NEEDLE = '''\
"""Train a tiny model."""
import math
import os

DEBUG = False
SCALE = 3


def log(msg):
    if DEBUG:
        print(msg)


def helper_a(x):
    return x + 1


def helper_b(x):
    y = x * 2
    return y


def unused(z):
    for i in range(z):
        z += i
    return z


class Config:
    def __init__(self):
        self.n = 4
        self.path = os.path.join("out", "run")


def main():
    cfg = Config()
    log("start")
    total = 0
    for i in range(3):
        total += helper_a(i)
    if total > 100:
        log("big")
    else:
        log("small")
    value = helper_b(SCALE)
    try:
        os.environ.get("X")
    except KeyError:
        pass
    fail(value)
    log(math.sqrt(total))


if __name__ == "__main__":
    main()
'''


# ``y = 3 * 2`` folds to 6 and the copy ``value = y`` propagates.
NEEDLE_CUT = "value = 6\nfail(value)\n"


def test_needle_a_forty_statement_script_shrinks_to_the_failing_computation():
    assert len(Program({"a.py": NEEDLE}, "a.py").stmts) >= 35
    assert reduce(NEEDLE, 6) == NEEDLE_CUT


def test_needle_across_a_local_module():
    main = """\
    import os
    from helpers import helper_b, SCALE

    value = helper_b(SCALE)
    print(os.getcwd())
    fail(value)
    """
    helpers = """\
    import math

    SCALE = 3


    def helper_b(x):
        y = x * 2
        return y


    def unused():
        return math.pi
    """
    assert reduce(main, 6, helpers=helpers) == NEEDLE_CUT


def test_needle_with_a_helper_whose_parameter_is_also_a_keyword():
    src = """\
    class V:
        def norm(self, p):
            return p * 10


    def norm(x, p=2):
        return x.norm(p=p)


    value = norm(V(), 1) + 0
    fail(value)
    """
    result = reduce(src, 10)
    assert "def norm(x" not in result


NOISE = (
    "def helper_{i}(a):\n    return a + {i}\n",
    "unused_{i} = {i} * 2\n",
    'if DEBUG:\n    log("debug {i}")\nelse:\n    skipped_{i} = {i}\n',
    "for k_{i} in range({i}):\n    total_{i} = k_{i}\n",
    'try:\n    tmp_{i} = int("{i}")\nexcept ValueError:\n    tmp_{i} = 0\n',
    "class Thing{i}:\n    def go(self):\n        return {i}\n",
    'log("step {i}")\n',
    "with Quiet():\n    quiet_{i} = [{i}, {i}]\n",
)


NOISE_HEADER = """\
import os

DEBUG = False
SCALE = 3


def log(msg):
    return None


class Quiet:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
"""


def generate_needle(rng: random.Random, n: int) -> str:
    """The failing computation inside ``main``, with ``n`` pieces of noise at module level
    and ``n`` inside ``main`` around the two lines that matter."""
    top = [rng.choice(NOISE).format(i=i) for i in range(n)]
    inner = [rng.choice(NOISE[1:]).format(i=n + i) for i in range(n)]
    first, second = sorted(rng.sample(range(len(inner) + 1), 2))
    body = inner[:first] + ["value = helper(SCALE)\n"] + inner[first:second] + [FAILING_LINE + "\n"] + inner[second:]
    parts = [
        NOISE_HEADER,
        *top[: n // 2],
        "def helper(x):\n    y = x * 2\n    return y\n",
        *top[n // 2 :],
        "def main():\n" + "".join(textwrap.indent(b, "    ") for b in body),
        'if __name__ == "__main__":\n    main()\n',
    ]
    return "\n\n".join(parts)


@settings(max_examples=5, deadline=None)
@given(st.randoms(use_true_random=False))
def test_needle_generated_noise_always_shrinks_to_the_same_cut(rng):
    src = generate_needle(rng, 8)
    assert len(Program({"a.py": src}, "a.py").stmts) >= 40
    assert reduce(src, 6) == NEEDLE_CUT
