"""What the commands print at their end: under ``--json`` one JSON object on the real
stdout and nothing else there (``json_stdout``), and the way a command fails (``fail``)."""

from __future__ import annotations

import json
import os
import sys

import click

# With --json, the process's real stdout, kept for the one JSON object (``json_stdout``).
JSON_OUT: list = []


def json_stdout() -> None:
    """Under ``--json`` stdout carries one JSON object and nothing else, whatever a library
    prints: the real stdout is kept aside for it, and file descriptor 1 becomes stderr for
    the rest of the command, Python's prints, a C library's writes and a background
    thread's alike (Ray's driver prints a lost node's raylet log on stdout from a thread
    of its own, `log_to_driver` or not)."""
    if JSON_OUT:
        return
    sys.stdout.flush()
    kept = os.dup(1)
    os.dup2(2, 1)
    JSON_OUT.append(os.fdopen(kept, "w", encoding="utf-8", closefd=True))


def emit_json(data: dict) -> None:
    text = json.dumps(data, indent=2, default=str)
    if JSON_OUT:
        JSON_OUT[0].write(text + "\n")
        JSON_OUT[0].flush()
    else:
        click.echo(text)


def fail(message: str, code: int, as_json: bool, **extra) -> None:
    click.echo(f"shrinkgpu: {message}", err=True)
    if as_json:
        emit_json({"error": message, "exit_code": code, **extra})
    sys.exit(code)
