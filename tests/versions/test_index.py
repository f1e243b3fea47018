"""versions/index.py: pip's indexes as the user's pip sees them, and what they offer."""

from __future__ import annotations

import datetime as dt

from packaging.version import Version

from shrinkgpu.versions.index import PYPI, Indexes, nightlies_between, offers, parse_pip_config, releases_between

from .wheels import make_wheel


def test_pip_config_precedence_is_pips_a_variable_over_install_over_global():
    text = ("global.index-url='https://mirror.example/simple'\n"
            "global.extra-index-url='file:///opt/a/simple file:///opt/b/simple'\n"
            "global.find-links='/opt/wheels'\n"
            "install.index-url='https://install.example/simple'\n"
            ":env:.find-links='/srv/wheels'\n")
    got = parse_pip_config(text)
    assert got == Indexes("https://install.example/simple", ("file:///opt/a/simple", "file:///opt/b/simple"),
                          ("/srv/wheels",))
    assert got.uv_args() == ["--index-url", "https://install.example/simple",
                             "--extra-index-url", "file:///opt/a/simple", "--extra-index-url", "file:///opt/b/simple",
                             "--find-links", "/srv/wheels", "--index-strategy", "unsafe-best-match"]
    assert parse_pip_config("") == Indexes(PYPI)
    assert Indexes(PYPI).uv_args() == ["--index-url", PYPI]  # one index: uv's own strategy is pip's
    assert parse_pip_config(":env:.no-index='1'\n:env:.find-links='/w'").uv_args() == ["--no-index", "--find-links",
                                                                                       "/w"]


def test_offers_are_the_installable_wheels_of_a_file_index_and_a_find_links_directory(tmp_path):
    simple = tmp_path / "simple" / "demo-lib"
    simple.mkdir(parents=True)
    (simple / "index.html").write_text(
        '<a href="../../files/demo_lib-1.0-py3-none-any.whl#sha256=00">demo_lib-1.0-py3-none-any.whl</a>\n'
        '<a href="../../files/demo_lib-1.1-py3-none-any.whl" data-yanked="">demo_lib-1.1-py3-none-any.whl</a>\n'
        '<a href="../../files/demo_lib-1.2-cp27-cp27m-win32.whl">demo_lib-1.2-cp27-cp27m-win32.whl</a>\n'
        '<a href="../../files/demo_lib-1.3.tar.gz">demo_lib-1.3.tar.gz</a>\n')
    links = tmp_path / "links"
    make_wheel(links, "demo_lib", "2.0", "")
    make_wheel(links, "demo_lib", "2.1rc1", "")
    make_wheel(links, "other", "9.0", "")
    found = offers("Demo_Lib", Indexes(f"file://{tmp_path / 'simple'}", (), (str(links),)))
    # yanked, another platform's wheel, a source archive, another project: left out
    assert [str(o.version) for o in found] == ["1.0", "2.0", "2.1rc1"]
    assert releases_between(found, Version("1.0"), Version("2.1")) == [Version("1.0"), Version("2.0")]
    assert offers("absent", Indexes(f"file://{tmp_path / 'simple'}")) == []


def test_a_release_is_counted_once_whatever_its_variants(tmp_path):
    for version in ("2.12.0", "2.12.0+cpu", "2.13.0+cpu", "2.14.0.dev20260901", "2.13.1.post1"):
        make_wheel(tmp_path, "tlib", version, "")
    found = offers("tlib", Indexes(no_index=True, find_links=(str(tmp_path),)))
    assert releases_between(found, Version("2.0"), Version("3.0")) == [Version("2.12.0"), Version("2.13.0"),
                                                                         Version("2.13.1.post1")]


def test_one_nightly_per_date_the_users_variant_first(tmp_path):
    for version in ("2.16.0.dev20260901", "2.16.0.dev20260901+cpu", "2.16.0.dev20260902+cu128",
                    "2.16.0.dev20260903", "2.16.0.dev20261201", "2.15.0"):
        make_wheel(tmp_path, "tlib", version, "")
    found = offers("tlib", Indexes(no_index=True, find_links=(str(tmp_path),)))
    picked = nightlies_between(found, dt.date(2026, 9, 1), dt.date(2026, 9, 30), "cpu")
    assert [str(o.version) for o in picked] == ["2.16.0.dev20260901+cpu", "2.16.0.dev20260902+cu128",
                                                 "2.16.0.dev20260903"]
    assert [o.nightly_date for o in picked] == [dt.date(2026, 9, d) for d in (1, 2, 3)]
