"""config-to-literal (passes/configs.py): a loaded configuration becomes the values the
program reads.
"""

from __future__ import annotations

from shrinkgpu.passes import ConfigToLiteral
from shrinkgpu.syntax import Facts, LoadRecord

from .helpers import dedent, each, line_of, start

SOURCE = """\
import argparse
import yaml
import torch

ap = argparse.ArgumentParser()
ap.add_argument("--config", default="config.yaml")
path = ap.parse_args().config
with open(path) as f:
    cfg = yaml.safe_load(f)
mcfg = cfg["model"]
kw = {k: v for k, v in mcfg.items() if k != "name"}
conv = torch.nn.Conv1d(**kw)
conv(torch.randn(2, cfg["data"]["channels"], 8))
"""

LOADED = (
    "{'seed': 1, 'model': {'name': 'tcn', 'in_channels': 3, 'out_channels': 4, 'kernel_size': 5}, "
    "'data': {'channels': 4, 'window': 128, 'sensors': ['acc_x', 'acc_y']}, 'log': {'dir': 'runs'}}"
)


def _cand(literal: str = LOADED, function: str = "yaml.safe_load"):
    line = line_of(SOURCE, "cfg = yaml.safe_load(f)")
    return start(SOURCE, Facts(loads=(LoadRecord("a.py", line, function, literal),)))


def test_the_read_becomes_the_keys_the_program_names_and_the_file_handling_goes():
    [text] = each(ConfigToLiteral(), _cand(), 1)
    # 'seed', 'window', 'sensors' and 'log' are named nowhere in the program; 'name' is
    # (the comprehension compares it).  The parameters of Conv1d reach it through
    # ``**kw`` without being spelled: they are pruned too, so a run rejects this level and
    # level 1 (the whole literal) is there for that.  The path goes with the ``with``;
    # the parser is argparse-to-namespace's to replace.
    assert text == dedent("""\
        import argparse
        import torch

        ap = argparse.ArgumentParser()
        ap.add_argument("--config", default="config.yaml")
        cfg = {'model': {'name': 'tcn'}, 'data': {'channels': 4}}
        mcfg = cfg["model"]
        kw = {k: v for k, v in mcfg.items() if k != "name"}
        conv = torch.nn.Conv1d(**kw)
        conv(torch.randn(2, cfg["data"]["channels"], 8))
        """)


def test_the_whole_literal_is_the_second_level():
    [text] = each(ConfigToLiteral(), _cand(), 2)
    assert f"cfg = {LOADED}\n" in text
    assert "open(" not in text and "parse_args" not in text
    assert ConfigToLiteral().units(_cand(), 3) is None


def test_keys_spelled_as_parameters_of_a_local_function_are_kept():
    source = SOURCE.replace("conv = torch.nn.Conv1d(**kw)", "def make(in_channels, out_channels, kernel_size):\n"
                            "    return torch.nn.Conv1d(in_channels, out_channels, kernel_size)\nconv = make(**kw)")
    line = line_of(source, "cfg = yaml.safe_load(f)")
    cand = start(source, Facts(loads=(LoadRecord("a.py", line, "yaml.safe_load", LOADED),)))
    [text] = each(ConfigToLiteral(), cand, 1)
    assert ("cfg = {'model': {'name': 'tcn', 'in_channels': 3, 'out_channels': 4, 'kernel_size': 5}, 'data': "
            "{'channels': 4}}") in text


def test_a_with_whose_file_is_read_elsewhere_stays():
    source = SOURCE.replace("    cfg = yaml.safe_load(f)\n", "    cfg = yaml.safe_load(f)\n    print(f.name)\n")
    line = line_of(source, "cfg = yaml.safe_load(f)")
    cand = start(source, Facts(loads=(LoadRecord("a.py", line, "yaml.safe_load", LOADED),)))
    [text] = each(ConfigToLiteral(), cand, 1)
    assert "with open(path) as f:\n    cfg = {'model'" in text
    assert "ap.parse_args()" in text


def test_nothing_without_a_record_or_when_the_line_holds_no_loader():
    assert ConfigToLiteral().units(start(SOURCE), 0) == []
    line = line_of(SOURCE, "mcfg = cfg")
    cand = start(SOURCE, Facts(loads=(LoadRecord("a.py", line, "yaml.safe_load", LOADED),)))
    assert ConfigToLiteral().units(cand, 0) == []


def test_json_loads_of_a_string_and_a_private_value_stays_a_read_of_the_environment():
    source = 'import json, os\ncfg = json.loads(os.environ["CFG"])\nprint(cfg["root"])\n'
    literal = "{'root': __import__(\"os\").environ['DATA_ROOT'], 'other': 1}"
    cand = start(source, Facts(loads=(LoadRecord("a.py", 2, "json.loads", literal),)))
    [text] = each(ConfigToLiteral(), cand, 1)
    assert "cfg = {'root': __import__('os').environ['DATA_ROOT']}\n" in text


def test_level_zero_puts_the_values_read_where_they_are_read():
    source = dedent("""\
        import yaml
        import torch

        with open("config.yaml") as f:
            cfg = yaml.safe_load(f)
        mcfg = cfg["model"]
        dcfg = cfg["data"]
        conv = torch.nn.Conv1d(mcfg["in_channels"], 4, cfg.get("kernel", 3))
        conv(torch.randn(2, dcfg["channels"], dcfg["window"] // 2))
        print(cfg.get("seed"))
        """)
    line = line_of(source, "cfg = yaml.safe_load(f)")
    cand = start(source, Facts(loads=(LoadRecord("a.py", line, "yaml.safe_load", LOADED),)))
    [text] = each(ConfigToLiteral(), cand, 0)
    assert text == dedent("""\
        import torch
        conv = torch.nn.Conv1d(3, 4, 3)
        conv(torch.randn(2, 4, 128 // 2))
        print(1)
        """)


def test_level_zero_keeps_a_part_used_whole_and_refuses_a_written_config():
    source = dedent("""\
        import json
        cfg = json.load(open("c.json"))
        make(**cfg["model"])
        """)
    cand = start(source, Facts(loads=(LoadRecord("a.py", 2, "json.load", LOADED),)))
    [text] = each(ConfigToLiteral(), cand, 0)
    assert text == "make(**{'name': 'tcn', 'in_channels': 3, 'out_channels': 4, 'kernel_size': 5})\n"
    written = source.replace('make(**cfg["model"])', 'cfg["seed"] = 2\nmake(**cfg["model"])')
    cand = start(written, Facts(loads=(LoadRecord("a.py", 2, "json.load", LOADED),)))
    assert ConfigToLiteral().units(cand, 0) == []
    updated = source.replace('make(**cfg["model"])', 'cfg["model"].update(a=1)\nmake(**cfg["model"])')
    cand = start(updated, Facts(loads=(LoadRecord("a.py", 2, "json.load", LOADED),)))
    assert ConfigToLiteral().units(cand, 0) == []

