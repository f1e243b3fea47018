"""The probe's keep of a loader's failing call (``probe.loading``), in this process: what
is kept of the file it read, and why a call is not kept."""

from __future__ import annotations

import json

import pytest

from shrinkgpu.worker.probe import loading

HISTORY = """\
import json

with open("history.json", "w") as out:
    out.write('{"loss": [1.0]}{"loss": [0.5]}')
with open("history.json") as f:
    json.load(f)
"""


def _raise_in(tmp_path, monkeypatch, text: str) -> BaseException:
    script = tmp_path / "train.py"
    script.write_text(text)
    monkeypatch.chdir(tmp_path)
    try:
        exec(compile(text, str(script), "exec"), {"__name__": "__main__"})
    except Exception as exc:  # (the script's own error, as the probe sees it go up)
        return exc
    raise AssertionError("the script did not fail")


def test_json_load_keeps_a_copy_of_the_file_and_its_text(tmp_path, monkeypatch):
    exc = _raise_in(tmp_path, monkeypatch, HISTORY)
    kept = (str(tmp_path / "kept"), [])
    loading.keep_loading_call(exc.__traceback__, (str(tmp_path),), kept)
    [entry] = kept[1]
    assert entry == {"op": "json.load", "call": None, "path": str(tmp_path / "kept" / "raised-0.pt"),
                     "loading": True, "what": "json.load"}
    record = json.loads((tmp_path / "kept" / "raised-0.pt.json").read_text())
    assert record["text"] == '{"loss": [1.0]}{"loss": [0.5]}' and record["keywords"] == []
    assert record["holds"] == "`history.json` as the run wrote it (30 bytes)"
    assert (tmp_path / "kept" / "raised-0.json").read_text() == record["text"]


def test_a_file_too_large_to_send_is_said_not_kept(tmp_path, monkeypatch):
    exc = _raise_in(tmp_path, monkeypatch, HISTORY)
    monkeypatch.setattr(loading, "FILE_MAX_BYTES", 10)
    kept = (str(tmp_path / "kept"), [])
    loading.keep_loading_call(exc.__traceback__, (str(tmp_path),), kept)
    [entry] = kept[1]
    assert entry["path"] is None
    assert entry["error"] == "the file it read, history.json, is 30 bytes (more than 10 bytes to send with a report)"
    assert not (tmp_path / "kept" / "raised-0.json").exists()


@pytest.mark.parametrize("text", [
    "import json\njson.loads('{')\n",  # not a loader of a file
    "raise ValueError('in the user code')\n",
])
def test_an_error_no_loader_raised_keeps_nothing(tmp_path, monkeypatch, text):
    exc = _raise_in(tmp_path, monkeypatch, text)
    kept = (str(tmp_path / "kept"), [])
    loading.keep_loading_call(exc.__traceback__, (str(tmp_path),), kept)
    assert kept[1] == []
