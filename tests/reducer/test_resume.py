"""The original's first run kept for --resume (reducer/kept_first.py): written with the
files it saved, read back into a new session with its paths moved there, and refused
when the program or the options changed."""

from __future__ import annotations

from pathlib import Path

from shrinkgpu.reducer import FirstRun, ReduceConfig, spec_for
from shrinkgpu.reducer import resume as kept_first
from shrinkgpu.reducer.original import Original
from shrinkgpu.worker import Observation


def test_a_kept_first_run_comes_back_in_the_new_session_and_a_changed_program_refuses_it(tmp_path: Path):
    script = tmp_path / "train.py"
    script.write_text("import helper\nraise SystemExit(1)\n")
    (tmp_path / "helper.py").write_text("X = 1\n")
    config = ReduceConfig(script=script, keep_error="boom", env={"HF_TOKEN": "s3cret-token", "PATH": "/usr/bin"})
    spec = spec_for(config)
    old, new = tmp_path / "session-1", tmp_path / "session-2"
    (old / "raised").mkdir(parents=True)
    (old / "raised" / "0.pt").write_bytes(b"args")
    (old / "call.pt").write_bytes(b"call")
    new.mkdir()
    obs = Observation(1, None, False, 42.0, "exception", None,
                      raised_calls=({"op": "f", "path": str(old / "raised" / "0.pt")},),
                      cut={"path": str(old / "call.pt"), "line": 3},
                      modules=(("helper", str(tmp_path / "helper.py"), "helper.py"),))
    original = Original(FirstRun(obs, spec, config), (obs,))
    main = script.read_text()

    def key(o):
        return kept_first.key_of(config, spec, main, o.first.observation.modules)

    where = tmp_path / "train.min.first"
    kept_first.save(where, original, old, key(original))
    assert b"s3cret-token" not in (where / "first.pkl").read_bytes()  # the environment is not kept
    back, why = kept_first.load(where, new, key)
    assert why is None
    kept = back.first.observation
    assert kept.wall == 42.0 and back.attempts[0] is kept
    assert kept.raised_calls[0]["path"] == str(new / "raised" / "0.pt")
    assert (new / "raised" / "0.pt").read_bytes() == b"args"
    assert kept.cut == {"path": str(new / "call.pt"), "line": 3} and (new / "call.pt").read_bytes() == b"call"
    # a module the run imported changed: the kept run is another program's
    (tmp_path / "helper.py").write_text("X = 2\n")
    gone, why = kept_first.load(where, new, key)
    assert gone is None and "another program" in why
    # nothing kept at all: nothing to say
    assert kept_first.load(tmp_path / "none.first", new, key) == (None, None)
