"""probe/paths.py: which files and objects are the user's: under the run's copies of the
user's directory."""

from __future__ import annotations

import sys
import types

from shrinkgpu.worker.probe.paths import is_under, is_user_file, of_users_class

ROOTS = ("/r/run-1/root",)


def test_a_path_is_under_a_root_only_as_a_whole_directory():
    assert is_under("/r/run-1/root", ROOTS) and is_under("/r/run-1/root/data/x.pt", ROOTS)
    assert not is_under("/r/run-1/rootless/x.py", ROOTS)


def test_code_without_a_file_is_never_the_users():
    assert is_user_file("/r/run-1/root/train.py", ROOTS)
    assert is_user_file("/r/run-1/root/sub/../train.py", ROOTS)  # as Python would resolve it
    assert not is_user_file("<string>", ("/",)) and not is_user_file("<frozen os>", ("/",))
    assert not is_user_file("/usr/lib/python3/os.py", ROOTS)


def test_an_object_is_the_users_when_its_class_is_defined_in_the_users_files(monkeypatch):
    module = types.ModuleType("users_data")
    module.__file__ = "/r/run-1/root/users_data.py"
    exec("class Vocab:\n    pass\nclass Slotted:\n    __slots__ = ()\n", module.__dict__)
    monkeypatch.setitem(sys.modules, "users_data", module)
    assert of_users_class(module.Vocab(), ROOTS)
    assert not of_users_class(module.Slotted(), ROOTS)  # no attributes to hold anything
    assert not of_users_class([1, 2], ROOTS)
