"""The report's redaction, on text alone: what a recorded value cut short still holds."""

from __future__ import annotations

from shrinkgpu.privacy import Redactor


def redactor(home: str) -> Redactor:
    return Redactor(env={"HOME": home, "API_KEY": "sk-live-7f3a9c21e5"})


def test_a_whole_private_path_is_replaced():
    r = redactor("/srv/pytest/case0/home/alicebob")
    assert r("f='/srv/pytest/case0/home/alicebob/datasets/sk-live-7f3a9c21e5.pt'") == "f='$HOME/datasets/$API_KEY.pt'"


def test_a_value_cut_short_inside_the_home_directory_leaks_no_part_of_it():
    home = "/srv/pytest/case0/home/alicebob"
    r = redactor(home)
    for cut in (len("/srv/pytest/case0/home"), len("/srv/pytest/case0/home/ali"), len(home) - 1):
        text = f"f='{home[:cut]}...', weights_only=True"
        out = r(text)
        assert out == "f='$HOME...', weights_only=True", (cut, out)
        assert "environment variable values" in r.replaced


def test_a_cut_that_reaches_only_a_public_parent_is_left_alone():
    r = redactor("/home/alicebob")
    assert r("f='/home...'") == "f='/home...'"
    assert r("f='/home/al...'") == "f='$HOME...'"
    # and an ellipsis elsewhere is not a path's end
    assert r("sizes (2, 3, ...) and /tmp/x...") == "sizes (2, 3, ...) and /tmp/x..."


def test_a_version_in_the_environment_is_not_a_secret_but_an_address_is():
    r = Redactor(env={"PYENV_VERSION": "3.11.9", "TORCH_VER": "2.13.0+cpu", "MASTER_ADDR": "10.20.30.40",
                      "API_KEY": "sk-live-7f3a9c21e5"})
    out = r("Python 3.11.9, torch 2.13.0+cpu, rendezvous at 10.20.30.40 with sk-live-7f3a9c21e5")
    assert out == "Python 3.11.9, torch 2.13.0+cpu, rendezvous at $MASTER_ADDR with $API_KEY"


def test_a_reduced_script_that_gained_a_version_string_leaks_nothing():
    from shrinkgpu.privacy import leaks
    env = {"PYENV_VERSION": "3.11.9", "API_KEY": "sk-live-7f3a9c21e5"}
    assert leaks("v = '3.11.9'\n", "print(1)\n", env=env) == []
    assert leaks("k = 'sk-live-7f3a9c21e5'\n", "print(1)\n", env=env) == ["the value of $API_KEY"]
