"""The parsers against real GPU error outputs from public reports.

Every file in tests/data/gpu_transcripts/ is an error output as a user posted it, with
its source in INDEX.toml (README.md there describes the formats).  For each: the kernel
assertion found in the output (or none), the family of the error, and for a process that
died without a Python exception, what the dying runtime said.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from shrinkgpu.families import (
    Family,
    classify_family,
    family_matches,
    is_asynchronous,
    kernel_condition,
    parse_kernel_assertion,
    parse_native_error,
)
from shrinkgpu.signature import Signature, normalize_message

DATA = Path(__file__).resolve().parents[1] / "data" / "gpu_transcripts"
INDEX = tomllib.loads((DATA / "INDEX.toml").read_text(encoding="utf-8"))["transcript"]
FAMILIES = {f.value: f for f in Family}


def entry_id(entry: dict) -> str:
    return entry["file"].removesuffix(".txt")


def test_the_collection_is_real_and_broad():
    assert len(INDEX) >= 12
    assert all(e["source"].startswith("https://") for e in INDEX)
    assert all((DATA / e["file"]).is_file() for e in INDEX)
    seen = {e["family"] for e in INDEX}
    assert {"device-side assert", "out of memory", "operator or kernel not available",
            "tensors on different devices", "process crashed"} <= seen
    assert any(e["backend"] == "rocm" for e in INDEX)


@pytest.mark.parametrize("entry", INDEX, ids=entry_id)
def test_kernel_assertion(entry):
    text = (DATA / entry["file"]).read_text(encoding="utf-8")
    found = parse_kernel_assertion(text)
    if not entry["kernel_assertion"]:
        assert found is None, found
        return
    assert found is not None
    assert kernel_condition(found) == entry["kernel_assertion"]
    kernel = found.split(": ")[1]
    assert kernel == (entry["kernel_function"] or "?")


@pytest.mark.parametrize("entry", INDEX, ids=entry_id)
def test_family(entry):
    text = (DATA / entry["file"]).read_text(encoding="utf-8")
    kernel = parse_kernel_assertion(text)
    expected = FAMILIES[entry["family"]]
    if entry["exception"]:
        assert classify_family(entry["exception"], entry["message_first_line"], kernel) is expected
        return
    # No Python exception: the process died (or the post shows only the device's lines).
    native = parse_native_error(text)
    if expected is Family.CRASH:
        sig = Signature.for_signal(6, "SIGABRT", output=text, stderr=text)
        assert sig.family is Family.CRASH
        # Words to tell it from another crash: what the runtime said, or its last lines.
        assert native is not None or kernel is not None or sig.crash_tail
    elif native is not None:
        assert classify_family(native[0], native[1], kernel) is expected
    else:
        assert classify_family("", entry["message_first_line"], kernel) is expected


@pytest.mark.parametrize("entry", [e for e in INDEX if e["family"] == "device-side assert"], ids=entry_id)
def test_device_asserts_are_asynchronous_and_linked_to_index_errors_when_they_check_an_index(entry):
    text = (DATA / entry["file"]).read_text(encoding="utf-8")
    kernel = parse_kernel_assertion(text)
    assert is_asynchronous(entry["exception"] or "RuntimeError", entry["message_first_line"], kernel)
    cond = entry["kernel_assertion"]
    index_like = any(word in cond for word in ("index", "idx", "n_classes", "Index", "srcSelect", "bounds"))
    if kernel is not None:
        assert family_matches(Family.INDEX, Family.DEVICE_ASSERT, kernel) is index_like
    assert family_matches(Family.DEVICE_ASSERT, Family.INDEX)


def test_oom_reports_of_every_era_normalise_to_one_bug():
    heads = set()
    for entry in INDEX:
        if entry["family"] != "out of memory" or "Tried to allocate" not in entry["message_first_line"]:
            continue
        heads.add(normalize_message(entry["message_first_line"]))
    assert heads == {"CUDA out of memory."}


def test_the_native_words_of_a_terminate_abort():
    text = (DATA / "nll_loss_assert_terminate_cpp.txt").read_text(encoding="utf-8")
    assert parse_native_error(text) == ("c10::CUDAError", "CUDA error: device-side assert triggered")
    hsa = (DATA / "rocm_device_assert_abort.txt").read_text(encoding="utf-8")
    kind, message = parse_native_error(hsa)
    assert kind == "HSA" and message.startswith("HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation")
