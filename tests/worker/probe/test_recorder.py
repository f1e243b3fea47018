"""probe/recorder.py with real processes: the first error of a run, read from the
exception chain that ended it and the torch errors it raised or caught on the way.
"""

from __future__ import annotations

import textwrap

import pytest

from shrinkgpu.signature import Family, Frame, TensorMeta
from worker.helpers import CE_CALL, HEADER, line_of, run

CE_TENSORS = (
    TensorMeta("args[0]", "float32", (3, 4), (4, 1), "cpu"),
    TensorMeta("args[1]", "int64", (3,), (1,), "cpu"),
)


# -- the signature of a failing script -----------------------------------------------
def test_failing_script_signature_has_root_class_message_operator_tensors_and_user_frame(fork_runner):
    text = HEADER + "x = 1\nloss = " + CE_CALL + "\nprint('not reached')\n"
    obs = run(fork_runner, text)
    assert (obs.status, obs.exit_code, obs.signal, obs.timed_out) == ("exception", 1, None, False)
    sig = obs.signature
    assert sig.type == "IndexError"
    assert sig.message == "Target 4 is out of bounds."
    assert sig.normalized == "Target <n> is out of bounds."
    assert sig.family is Family.INDEX
    assert sig.op.name == "torch.nn.functional.cross_entropy"
    assert sig.op.tensors == CE_TENSORS
    assert "kwargs['ignore_index'] = -100" in sig.op.others
    assert sig.frame == Frame(file="s.py", line=5, function="<module>", source="loss = " + CE_CALL)
    assert sig.caught_earlier == ()
    assert obs.failed and obs.describe() == "IndexError: Target 4 is out of bounds."
    assert "not reached" not in obs.stdout
    assert obs.stderr.rstrip().endswith("IndexError: Target 4 is out of bounds.")


# -- wrapper chains -------------------------------------------------------------------
CHAINS = {
    "raise-from": f"""\
        class Wrapper(Exception):
            pass
        try:
            {CE_CALL}
        except IndexError as e:
            raise Wrapper("training step failed") from e
        """,
    "implicit-context": f"""\
        try:
            {CE_CALL}
        except IndexError:
            raise RuntimeError("while handling: logging failed")
        """,
    "error-in-finally": f"""\
        try:
            {CE_CALL}
        finally:
            raise OSError("could not write the checkpoint")
        """,
    "harmless-root": f"""\
        try:
            open("missing.ckpt")
        except FileNotFoundError:
            {CE_CALL}
        """,
}


@pytest.mark.parametrize("case", sorted(CHAINS))
def test_root_of_a_wrapper_chain_is_the_torch_error(fork_runner, case):
    text = HEADER + textwrap.dedent(CHAINS[case])
    obs = run(fork_runner, text)
    assert obs.status == "exception" and obs.exit_code == 1
    sig = obs.signature
    assert (sig.type, sig.message) == ("IndexError", "Target 4 is out of bounds.")
    assert sig.op.name == "torch.nn.functional.cross_entropy"
    assert sig.op.tensors == CE_TENSORS
    assert sig.frame == Frame("s.py", line_of(text, CE_CALL), "<module>", CE_CALL)


def test_raise_from_none_ends_the_chain_as_python_shows_it_and_keeps_what_it_hid(fork_runner):
    text = HEADER + textwrap.dedent(f"""\
        try:
            {CE_CALL}
        except IndexError:
            raise ValueError("bad batch") from None
        """)
    sig = run(fork_runner, text).signature
    assert (sig.type, sig.message, sig.op) == ("ValueError", "bad batch", None)
    assert sig.frame.source == 'raise ValueError("bad batch") from None'
    assert sig.suppressed == "IndexError: Target 4 is out of bounds."
    assert sig.keep_text().splitlines() == ["ValueError: bad batch", "IndexError: Target 4 is out of bounds."]


def test_raise_from_e_keeps_the_cause_as_the_first_error_and_hides_nothing(fork_runner):
    text = HEADER + textwrap.dedent(CHAINS["raise-from"])
    sig = run(fork_runner, text).signature
    assert (sig.type, sig.suppressed) == ("IndexError", None)


def test_a_weights_only_load_of_an_array_is_the_error_torch_shows(fork_runner, tmp_path):
    text = textwrap.dedent("""\
        import numpy as np
        import torch
        torch.save({"rows": np.arange(3)}, "rows.pt")
        torch.load("rows.pt")
        """)
    sig = run(fork_runner, text).signature
    assert sig.type == "_pickle.UnpicklingError" and sig.message.startswith("Weights only load failed.")
    assert sig.suppressed.startswith("_pickle.UnpicklingError: Unsupported global: GLOBAL numpy")
    assert "WeightsUnpickler error: Unsupported global" in sig.message  # its continuation lines


def test_sys_exit_in_an_except_handler_keeps_the_original_error_as_root(fork_runner):
    text = HEADER + f"try:\n    {CE_CALL}\nexcept Exception as e:\n    print('error:', e)\n    sys.exit(1)\n"
    obs = run(fork_runner, text)
    assert (obs.status, obs.exit_code) == ("exit", 1)
    assert obs.stdout == "error: Target 4 is out of bounds.\n"
    sig = obs.signature
    assert (sig.type, sig.message, sig.op.name) == (
        "IndexError",
        "Target 4 is out of bounds.",
        "torch.nn.functional.cross_entropy",
    )
    assert sig.frame.line == 5


def test_without_a_torch_error_the_root_is_the_deepest_exception_of_the_chain(fork_runner):
    text = "d = {}\ntry:\n    d['k']\nexcept KeyError as e:\n    raise RuntimeError('wrap') from e\n"
    sig = run(fork_runner, text).signature
    assert (sig.type, sig.message, sig.op) == ("KeyError", "'k'", None)
    assert sig.frame == Frame("s.py", 3, "<module>", "d['k']")


# -- torch errors the script caught ---------------------------------------------------
def test_caught_torch_error_then_normal_end_is_not_a_failure(fork_runner):
    """What the code does: the run is "ok" and the caught error is not exposed at all
    (the probe records it in ``torch_errors``, but Observation keeps it only as
    ``caught_earlier`` of a later failure)."""
    text = HEADER + f"try:\n    {CE_CALL}\nexcept IndexError:\n    print('skipped a bad batch')\n"
    obs = run(fork_runner, text)
    assert (obs.status, obs.exit_code, obs.signal) == ("ok", 0, None)
    assert obs.signature is None and not obs.failed
    assert obs.stdout == "skipped a bad batch\n"
    assert obs.describe() == "finished without error (exit status 0)"


def test_caught_torch_error_is_noted_when_a_different_error_ends_the_run(fork_runner):
    text = HEADER + f"try:\n    {CE_CALL}\nexcept IndexError:\n    pass\nraise ValueError('later')\n"
    sig = run(fork_runner, text).signature
    assert (sig.type, sig.message, sig.op) == ("ValueError", "later", None)
    assert sig.frame == Frame("s.py", 8, "<module>", "raise ValueError('later')")
    assert sig.caught_earlier == ("IndexError: Target 4 is out of bounds. in torch.nn.functional.cross_entropy",)


def test_a_caught_error_with_the_same_class_and_message_is_the_first_error(fork_runner):
    """CUDA's sticky errors: the script caught the first report and died at a later
    call with the same error; the earlier call is the suspect."""
    later = "F.cross_entropy(torch.randn(5, 4), torch.tensor([4, 0, 0, 0, 0]))"
    text = HEADER + f"try:\n    {CE_CALL}\nexcept IndexError:\n    pass\n{later}\n"
    sig = run(fork_runner, text).signature
    assert sig.type == "IndexError"
    assert sig.op.tensors == CE_TENSORS
    assert sig.frame == Frame("s.py", 5, "<module>", CE_CALL)
