"""Extraction: the failing call alone, rebuilt from what was saved just before it ran,
checked in a fresh interpreter; with real processes and real torch."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

EXE = [sys.executable, "-m", "shrinkgpu"]


def extract(tmp_path: Path, source: str, *extra):
    (tmp_path / "s.py").write_text(textwrap.dedent(source))
    return subprocess.run([*EXE, "extract", "s.py", "--json", *extra], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)


def test_floats_are_random_with_their_metadata_and_labels_exact(tmp_path):
    done = extract(tmp_path, """\
        import torch
        import torch.nn.functional as F
        torch.manual_seed(0)
        model = torch.nn.Linear(8, 4)
        labels = [1, 2, 3, 4, 2]
        logits = model(torch.randn(5, 8))
        print("training")
        loss = F.cross_entropy(logits, torch.tensor(labels), reduction="none", ignore_index=255)
        """)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["level"] == "metadata" and data["data"] is None and data["lines"] <= 8
    assert (tmp_path / "s.extracted.py").read_text() == (
        "import torch\n\n"
        "x0 = torch.randn(5, 4).requires_grad_()\n"
        "x1 = torch.tensor([1, 2, 3, 4, 2], dtype=torch.int64)\n"
        "torch.nn.functional.cross_entropy(x0, x1, ignore_index=255, reduction='none')\n"
    )
    plain = subprocess.run([sys.executable, "s.extracted.py"], cwd=tmp_path, capture_output=True, text=True)
    assert "IndexError: Target 4 is out of bounds." in plain.stderr


def test_strides_and_shared_storage_are_rebuilt(tmp_path):
    done = extract(tmp_path, """\
        import torch
        x = torch.randn(4, 6, 8)
        y = x.permute(0, 2, 1)
        y.view(4, 48)
        """)
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "s.extracted.py").read_text()
    assert ".as_strided((4, 8, 6), (48, 1, 8), 0)" in text and "x0.view(4, 48)" in text


def test_a_large_index_is_kept_exact_in_a_data_file(tmp_path):
    done = extract(tmp_path, """\
        import torch
        table = torch.nn.Embedding(100, 16)
        ids = torch.arange(200) % 101
        table(ids)
        """)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["data"] == str(tmp_path / "s.extracted.pt")
    text = (tmp_path / "s.extracted.py").read_text()
    assert "data = torch.load('s.extracted.pt')" in text and "data['args[0]']" in text
    assert "torch.randn(100, 16)" in text  # the weights need not be the model's


def test_a_failure_in_backward_says_why_it_cannot_be_extracted(tmp_path):
    done = extract(tmp_path, """\
        import torch
        w = torch.randn(3, requires_grad=True)
        h = torch.sigmoid(w)
        h += 1
        h.sum().backward()
        """)
    assert done.returncode == 3
    assert "autograd graph" in json.loads(done.stdout)["error"]
    assert not (tmp_path / "s.extracted.py").exists()


def test_a_tensor_holding_an_inf_is_kept_exact(tmp_path):
    # Random numbers would fail multinomial's check too (a negative one), with the same
    # message: the inf that the training produced is the bug, and it stays.  A small
    # tensor is written inline: the call runs alone, with no file beside it.
    done = extract(tmp_path, """\
        import torch
        probs = torch.full((3, 4), 0.25)
        probs[1, 2] = float("inf")
        weights = torch.rand(5)
        torch.multinomial(probs, 1)
        """)
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "s.extracted.py").read_text()
    assert text == (
        "import torch\n\n"
        "x0 = torch.tensor([[0.25, 0.25, 0.25, 0.25], [0.25, 0.25, float('inf'), 0.25], [0.25, 0.25, 0.25, 0.25]])\n"
        "torch.multinomial(x0, 1)\n"
    )
    assert not (tmp_path / "s.extracted.pt").exists()


def test_a_large_tensor_holding_an_inf_is_loaded_exact(tmp_path):
    done = extract(tmp_path, """\
        import torch
        probs = torch.full((30, 4), 0.25)
        probs[1, 2] = float("inf")
        torch.multinomial(probs, 1)
        """)
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "s.extracted.py").read_text()
    assert text == (
        "import torch\n\n"
        "data = torch.load('s.extracted.pt')\n"
        "x0 = data['args[0]']\n"
        "torch.multinomial(x0, 1)\n"
    )
    saved = subprocess.run([sys.executable, "-c", "import torch; print(torch.load('s.extracted.pt')['args[0]'][1, 2])"],
                           cwd=tmp_path, capture_output=True, text=True)
    assert saved.stdout.strip() == "tensor(inf)"


def test_a_functional_seen_under_its_private_module_is_written_under_its_public_name(tmp_path):
    # F.linear is torch._C._nn.linear, which is what a torch function mode receives
    done = extract(tmp_path, """\
        import torch
        import torch.nn.functional as F
        x = torch.randn(6, 5)
        F.linear(x, torch.randn(3, 4))
        """)
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "s.extracted.py").read_text()
    assert text.endswith("torch.nn.functional.linear(x0, x1)\n") and "torch._C" not in text
    plain = subprocess.run([sys.executable, "s.extracted.py"], cwd=tmp_path, capture_output=True, text=True)
    assert "mat1 and mat2 shapes cannot be multiplied (6x5 and 4x3)" in plain.stderr


@pytest.mark.parametrize("call, public", [
    ("torch.sparse.mm(torch.eye(6).to_sparse(), torch.randn(5, 3))", "torch.sparse.mm"),
    ("torch.linalg.inv(torch.randn(3, 4))", "torch.linalg.inv"),
    ("torch.fft.irfft(torch.randn(4, dtype=torch.complex64), n=-3)", "torch.fft.irfft"),
], ids=["sparse", "linalg", "fft"])
def test_sparse_linalg_and_fft_calls_are_written_under_their_public_names(tmp_path, call, public):
    done = extract(tmp_path, f"import torch\n{call}\n")
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "s.extracted.py").read_text()
    assert f"\n{public}(x0" in text and "torch._C" not in text, text
    again = subprocess.run([sys.executable, "s.extracted.py"], cwd=tmp_path, capture_output=True, text=True)
    assert again.returncode != 0 and "AttributeError" not in again.stderr, again.stderr
