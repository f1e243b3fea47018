"""reducer/first_run.py: the variable that makes kernel launches synchronous, by the
backend the run reported, and the config every later run then uses."""

from __future__ import annotations

from fakes import config
from shrinkgpu.reducer.first_run import with_sync_launches


def test_the_rocm_variable_is_never_the_nvidia_one():
    from shrinkgpu.reducer import launch_variable

    assert launch_variable({"hip": "6.2.41133", "cuda": None}) == ("AMD_SERIALIZE_KERNEL", "3")
    assert launch_variable({"hip": None, "cuda": "12.8"}) == ("CUDA_LAUNCH_BLOCKING", "1")


def test_the_launch_variable_follows_the_backend():
    from shrinkgpu.reducer import launch_variable

    assert launch_variable({"cuda": "12.8", "hip": None}) == ("CUDA_LAUNCH_BLOCKING", "1")
    assert launch_variable({"cuda": None, "hip": "6.4.1"}) == ("AMD_SERIALIZE_KERNEL", "3")
    assert launch_variable({}) == ("CUDA_LAUNCH_BLOCKING", "1")


def test_synchronous_launches_are_added_to_a_copy_of_the_users_environment(tmp_path):
    asked = config(tmp_path / "train.py", env={"PATH": "/bin"})
    localised, variable = with_sync_launches(asked, {"hip": "6.2.41133"})
    assert variable == ("AMD_SERIALIZE_KERNEL", "3")
    assert localised.env == {"PATH": "/bin", "AMD_SERIALIZE_KERNEL": "3"}
    assert asked.env == {"PATH": "/bin"}  # the config asked for is a frozen value, unchanged
    assert localised.script == asked.script and localised.keep_error == asked.keep_error
