"""docs/cli.md is the click help of every command (docs/gen_cli.py writes it): it must
be what the generator makes of the help now, and no option may be missing from it."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import click
import pytest

from shrinkgpu.cli import cli

ROOT = Path(__file__).resolve().parents[2]
CLI_MD = ROOT / "docs" / "cli.md"


def _generator():
    spec = importlib.util.spec_from_file_location("gen_cli", ROOT / "docs" / "gen_cli.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _generator()


def _section(text: str, title: str) -> str:
    """The part of docs/cli.md under ``## title``, up to the next section."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match is not None, f"docs/cli.md has no section '## {title}'; run `{gen.REGENERATE}`"
    return match.group(1)


def _options(command: click.Command) -> list[str]:
    ctx = click.Context(command, info_name=command.name, **command.context_settings)
    names = []
    for param in command.get_params(ctx):
        if isinstance(param, click.Option) and not param.hidden:
            names += [*param.opts, *param.secondary_opts]
    return names


def test_cli_md_is_the_help_as_it_is_now():
    committed = CLI_MD.read_text(encoding="utf-8")
    recorded = gen.recorded_click_version(committed)
    if recorded != gen.click_version():
        pytest.skip(f"docs/cli.md was generated with click {recorded}, this is click {gen.click_version()}, "
                    f"whose help may be laid out otherwise; the option check below still runs "
                    f"(`{gen.REGENERATE}` when the project moves to this click)")
    wanted = gen.render()
    assert committed == wanted, (
        f"docs/cli.md differs from the help of the commands: run `{gen.REGENERATE}` and commit it\n"
        + gen.difference(committed, wanted)
    )


@pytest.mark.parametrize("name", ["reduce", *sorted(n for n in cli.commands if n != "reduce")])
def test_no_option_of_a_command_is_missing_from_cli_md(name):
    section = _section(CLI_MD.read_text(encoding="utf-8"), f"shrinkgpu {name}")
    missing = [o for o in _options(cli.commands[name])
               if not re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", section)]
    assert not missing, (f"`shrinkgpu {name} --help` has options docs/cli.md lacks: {', '.join(missing)}; "
                         f"run `{gen.REGENERATE}`")


def test_the_reference_does_not_depend_on_the_terminal(monkeypatch):
    wide = gen.render()
    monkeypatch.setenv("COLUMNS", "40")
    assert gen.render() == wide
