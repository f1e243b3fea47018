"""data-literals (passes/literals.py): the records of a batch written as literals are
dropped in runs, then one by one; lists of numbers become zeros of the same length."""

from __future__ import annotations

from shrinkgpu.passes import ShrinkDataLiterals
from shrinkgpu.syntax import Program

BATCH = (
    "import torch\n"
    "def collate(batch):\n"
    "    return torch.tensor([b['ids'] for b in batch])\n"
    "collate([{'ids': [5, 1, 2, 3, 4, 5, 6, 7, 8], 'mask': [1, 1]}, {'ids': [1, 2]}, {'ids': [3, 4]},\n"
    "         {'ids': [9, 9]}, {'ids': [8, 8]}])\n"
    "milestones = [30, 60, 90]\n"
    "names = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i']\n"
)


def test_a_batch_of_records_is_split_record_by_record_and_its_numbers_zeroed():
    cand = Program({"s.py": BATCH}, "s.py").initial()
    p = ShrinkDataLiterals(min_tokens=0)
    records = p.units(cand, 0)
    # five records, one unit each; nine strings in runs of two (no more than CHUNKS runs)
    assert len(records) == 5 + 5
    kept_first = p.apply(cand, records[1:5]).files["s.py"]
    assert "collate([{'ids': [5, 1, 2, 3, 4, 5, 6, 7, 8], 'mask': [1, 1]}])\n" in kept_first
    # the last record kept: no comma the original did not have, no line break left over
    kept_last = p.apply(cand, records[:4]).files["s.py"]
    assert "collate([{'ids': [8, 8]}])\n" in kept_last
    # a short list of numbers is configuration: never split, never zeroed
    assert all("milestones" not in p.apply(cand, [u]).files["s.py"].replace("milestones = [30, 60, 90]", "")
               for u in records)
    # the records were single already; the strings now go one by one
    assert len(p.units(cand, 1)) == 9
    [zero] = p.units(cand, 2)
    assert "collate([{'ids': [0] * 9, 'mask': [1, 1]}, {'ids': [1, 2]}" in p.apply(cand, [zero]).files["s.py"]
    assert p.units(cand, 3) is None


def test_a_long_list_is_split_in_runs_first_then_alone_once_it_is_short():
    rows = ", ".join(f"[{i}, {i}]" for i in range(32))
    cand = Program({"s.py": f"rows = [{rows}]\n"}, "s.py").initial()
    p = ShrinkDataLiterals(min_tokens=0)
    runs = p.units(cand, 0)
    assert [len(u) for u in runs] == [4] * 8
    assert p.apply(cand, runs[1:]).files["s.py"] == "rows = [[0, 0], [1, 1], [2, 2], [3, 3]]\n"
    # 32 elements are too many to try one by one (twice as many tests when all stay)
    assert p.units(cand, 1) == []
    twelve = ", ".join(f"[{i}]" for i in range(12))
    cand = Program({"s.py": f"rows = [{twelve}]\n"}, "s.py").initial()
    assert len(p.units(cand, 0)) == 6 and len(p.units(cand, 1)) == 12


def test_only_data_is_split_and_a_tuple_keeps_its_comma():
    source = (
        "import torch\n"
        "layers = [torch.nn.Linear(2, 2), torch.nn.ReLU(), torch.nn.Linear(2, 2), torch.nn.ReLU()]\n"
        "pairs = [(1, 2), (3, 4), (5, x), (7, 8)]\n"
        "shape = ((1, 2), (3, 4), (5, 6), (7, 8))\n"
        "weights = [0.5, 1, 2, 3, 4, 5, 6, -7]\n"
        "flags = [True, False, True, True, False, False, True, True]\n"
        "mixed = [True, 1, 2, 3, 4, 5, 6, 7]\n"
    )
    cand = Program({"s.py": source}, "s.py").initial()
    p = ShrinkDataLiterals(min_tokens=0)
    # the modules run code, ``pairs`` reads a name: neither is data
    units = p.units(cand, 0)
    assert len(units) == 4
    assert p.apply(cand, units[:3]).files["s.py"].splitlines()[3] == "shape = ((7, 8),)"
    zeroed = p.apply(cand, p.units(cand, 2)).files["s.py"].splitlines()
    assert zeroed[4:] == ["weights = [0.0] * 8", "flags = [False] * 8", "mixed = [True, 1, 2, 3, 4, 5, 6, 7]"]


def test_the_scripts_own_constants_are_left_as_written_and_a_batch_is_not():
    source = (
        "KEYWORDS = ['yes', 'no', 'up', 'down', 'left', 'right', 'on', 'off', 'stop', 'go']\n"
        "CITIES = [['paris'], ['new', 'york'], ['lagos'], ['sao', 'paulo'], ['oslo']]\n"
        "WEIGHTS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]\n"
        "batch = [{'ids': [%s], 'label': %d} for _ in [0]]\n"
        "pasted = [%s]\n"
    ) % (", ".join(str(i) for i in range(60)), 3,
         ", ".join("[" + ", ".join(str(r * 8 + c) for c in range(8)) + "]" for r in range(8)))
    source += "collate([%s])\n" % ", ".join("{'ids': [%s]}" % ", ".join(str(i + r) for i in range(10))
                                            for r in range(6))
    cand = Program({"s.py": source}, "s.py").initial()
    p = ShrinkDataLiterals()
    # the paste's 8 rows and the call's 6 records are split; the constants are not
    records = p.units(cand, 0)
    assert len(records) == 8 + 6
    kept = p.apply(cand, records[9:]).files["s.py"]
    assert kept.splitlines()[:5] == source.splitlines()[:5]
    assert kept.splitlines()[-1] == "collate([{'ids': [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}])"
    # numbers are zeroed inside large literals only, each row of a pasted tensor however
    # short (the 8 x 8 paste is large as a whole), the 9 weights not
    zeroed = p.apply(cand, p.units(cand, 2)).files["s.py"].splitlines()
    assert zeroed[2] == "WEIGHTS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]"
    assert zeroed[3] == "batch = [{'ids': [0] * 60, 'label': 3} for _ in [0]]"
    assert zeroed[4] == "pasted = [" + ", ".join(["[0] * 8"] * 8) + "]"
    assert zeroed[5] == "collate([{'ids': [0] * 10}, {'ids': [0] * 10}, {'ids': [0] * 10}, {'ids': [0] * 10}, " \
                        "{'ids': [0] * 10}, {'ids': [0] * 10}])"
