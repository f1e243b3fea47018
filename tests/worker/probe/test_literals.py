"""probe/literals.py: source text for the values a run saw, never a private value baked
into a script (what the environment or the home directory held stays a read of it)."""

from __future__ import annotations

from shrinkgpu.worker.probe.literals import config_literal, literal, private_literal


def test_a_literal_evaluates_to_the_value_or_there_is_none():
    assert literal(3) == "3" and literal("a'b") == '"a\'b"' and literal((1,)) == "(1,)"
    assert literal(float("inf")) == "float('inf')" and literal(float("nan")) == "float('nan')"
    assert literal(object()) is None
    assert literal(list(range(65))) is None  # longer than a person writes


def test_a_configuration_is_written_as_its_dicts_lists_and_scalars():
    config = {"model": {"hidden": [32, 64], "act": "relu"}, "seed": 1, "dropout": None, "pair": (2,)}
    text = config_literal(config, ())
    assert text == "{'model': {'hidden': [32, 64], 'act': 'relu'}, 'seed': 1, 'dropout': None, 'pair': (2,)}"
    assert eval(text) == config
    assert config_literal({"when": object()}, ()) is None  # a value with no plain literal
    assert config_literal({(1, 2): 3}, ()) is None  # a key no configuration file writes


def test_what_the_environment_held_stays_a_read_of_the_environment(monkeypatch):
    monkeypatch.setenv("SHRINKGPU_TEST_TOKEN", "sk-live-7f3a9c21e5")
    monkeypatch.setenv("SHRINKGPU_TEST_DEVICE", "cpu")  # shorter than a secret: a word
    assert private_literal("sk-live-7f3a9c21e5", ()) == '__import__("os").environ[\'SHRINKGPU_TEST_TOKEN\']'
    assert private_literal("Bearer sk-live-7f3a9c21e5", ()) is None  # holds it: no literal at all
    assert private_literal("cpu", ()) == "'cpu'"
    assert config_literal({"key": "sk-live-7f3a9c21e5"}, ()) == (
        "{'key': __import__(\"os\").environ['SHRINKGPU_TEST_TOKEN']}")


def test_a_path_in_the_home_directory_keeps_its_tilde_and_one_in_the_runs_copy_is_relative(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", "/home/alice")
    assert private_literal("/home/alice/data/train.csv", ()) == '__import__("os").path.expanduser(\'~/data/train.csv\')'
    copy = tmp_path / "run-3" / "root"
    (copy / "data").mkdir(parents=True)
    monkeypatch.chdir(copy)
    assert private_literal(str(copy / "data" / "x.pt"), (str(copy),)) == "'data/x.pt'"
    assert private_literal(str(tmp_path / "elsewhere.pt"), (str(copy),)) == repr(str(tmp_path / "elsewhere.pt"))
