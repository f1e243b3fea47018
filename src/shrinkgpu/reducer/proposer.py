"""``--propose-with CMD``: the command that proposes programs, run for the search's last
tier (passes/external.py turns what it prints into units; the oracle judges them).

The command is run by the shell, in the directory shrinkgpu was started from, with the
best program so far: its main file on stdin, every file of it as JSON
(``{"main": ..., "files": {path: text}}``) in the file ``$SHRINKGPU_FILES``, the main
file's name in ``$SHRINKGPU_MAIN`` and the first error to keep in ``$SHRINKGPU_ERROR``.
It prints its proposals on stdout, one JSON object a line: ``{"text": "..."}`` (the main
file) or ``{"files": {"train.py": "...", "helpers.py": null}}``.  A command that fails,
runs past its time or proposes nothing is skipped, with a note in the report; the
search goes on without it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Mapping

from shrinkgpu.limits import Limits
from shrinkgpu.passes.external import Proposal
from shrinkgpu.reducer.events import Talk

# Seconds one call of the command may take (less when --max-time leaves less).
PROPOSE_TIMEOUT = 300.0
# Proposals read from one call; the rest are left out, with a note.
MAX_PROPOSALS = 64
# Below this many seconds left under --max-time, the command is not started.
MIN_SECONDS = 2.0


def parse_proposals(output: str, files: Mapping[str, str], main: str) -> tuple[list[Proposal], list[str]]:
    """The proposals in ``output`` (one JSON object a line), and what was wrong with the
    lines that are not one."""
    proposals: list[Proposal] = []
    problems: list[str] = []
    for number, line in enumerate(output.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError:
            problems.append(f"line {number} is not JSON")
            continue
        proposal, problem = proposal_of(data, files, main)
        if proposal is None:
            problems.append(f"line {number}: {problem}")
        elif len(proposals) < MAX_PROPOSALS:
            proposals.append(proposal)
        else:
            problems.append(f"line {number}: more than {MAX_PROPOSALS} proposals, left out")
    return proposals, problems


def proposal_of(data: object, files: Mapping[str, str], main: str) -> tuple[Proposal | None, str]:
    if not isinstance(data, dict):
        return None, "not a JSON object"
    if isinstance(data.get("text"), str):
        return Proposal({main: data["text"]}), ""
    named = data.get("files")
    if not isinstance(named, dict) or not named:
        return None, 'neither "text" nor "files"'
    for path, text in named.items():
        if path not in files:
            return None, f"{path!r} is not a file of the program"
        if text is not None and not isinstance(text, str):
            return None, f"the text of {path!r} is not a string"
    return Proposal(dict(named)), ""


class ShellProposer:
    """``--propose-with``'s command as the external pass's ``Proposer``."""

    def __init__(self, command: str, talk: Talk, limits: Limits, workdir: Path, cwd: Path, error: str):
        self.command = command
        self.talk = talk
        self.limits = limits
        self.workdir = workdir  # where the program's files are written for the command
        self.cwd = cwd
        self.error = error
        self.calls = 0

    def __call__(self, files: Mapping[str, str], main: str) -> list[Proposal]:
        # within the search's share of --max-time: the checks after it keep theirs
        left = self.limits.search_left()
        timeout = PROPOSE_TIMEOUT if left is None else min(PROPOSE_TIMEOUT, left - MIN_SECONDS)
        if timeout < MIN_SECONDS:
            return []
        self.calls += 1
        self.workdir.mkdir(parents=True, exist_ok=True)
        program = self.workdir / "program.json"
        program.write_text(json.dumps({"main": main, "files": dict(files)}), encoding="utf-8")
        env = {**os.environ, "SHRINKGPU_MAIN": main, "SHRINKGPU_FILES": str(program), "SHRINKGPU_ERROR": self.error}
        self.talk.stage(f"--propose-with: asking {self.command!r} for proposals")
        output, failed = self.run(files[main], env, timeout)
        if failed is not None:
            self.talk.note(f"--propose-with: {failed}; skipped")
            return []
        proposals, problems = parse_proposals(output, files, main)
        if problems:
            self.talk.note(f"--propose-with: {len(problems)} line(s) of its output left out ({problems[0]})",
                           show=False)
        if not proposals:
            self.talk.note("--propose-with: the command proposed nothing this time; skipped")
        else:
            self.talk.stage(f"--propose-with: {len(proposals)} proposal(s), judged like every candidate")
        return proposals

    def run(self, stdin: str, env: Mapping[str, str], timeout: float) -> tuple[str, str | None]:
        """The command's stdout, and why there is none (a sentence) when it failed."""
        try:
            proc = subprocess.Popen(self.command, shell=True, cwd=self.cwd, env=dict(env), text=True,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    start_new_session=True)
        except OSError as exc:
            return "", f"the command could not be started ({exc})"
        try:
            out, err = proc.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            stop(proc)
            return "", f"the command did not finish within {timeout:.0f}s"
        except BaseException:
            stop(proc)  # an interrupt: the command goes with the search
            raise
        if proc.returncode != 0:
            last = next((ln.strip() for ln in reversed(err.splitlines()) if ln.strip()), "")
            return "", f"the command exited with {proc.returncode}" + (f" ({last[:200]})" if last else "")
        return out, None


def stop(proc: subprocess.Popen) -> None:
    """The command and whatever it started (its own session) killed, and reaped."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        proc.communicate(timeout=5)
    except (subprocess.TimeoutExpired, ValueError, OSError):
        pass
