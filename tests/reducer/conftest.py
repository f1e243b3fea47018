import pytest

from fakes import SCRIPT, Contexts


@pytest.fixture
def contexts():
    made = Contexts()
    yield made
    made.close()


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    return path
