"""End to end: a dataset built from seeded draws is loaded, not built, in the result
(passes/data.py), the pickle lies beside the result, and ``--no-load-objects`` keeps the
constructor.  Real workers, real torch, from the command line."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

CLIPS = textwrap.dedent("""\
    import numpy as np
    import torch
    from torch.utils.data import DataLoader, Dataset


    def make_clip(rng, n_mels):
        return rng.normal(size=(int(rng.integers(4, 30)), n_mels)).astype(np.float32)


    class Clips(Dataset):
        def __init__(self, n, seed, n_mels=8):
            rng = np.random.default_rng(seed)
            self.clips = [make_clip(rng, n_mels) for _ in range(n)]
            self.labels = rng.integers(0, 3, size=n)

        def __len__(self):
            return len(self.clips)

        def __getitem__(self, i):
            return torch.from_numpy(self.clips[i]), int(self.labels[i])


    def collate(batch):
        clips, labels = zip(*batch)
        return torch.cat(clips), torch.tensor(labels)


    ds = Clips(64, seed=7)
    shuffle = torch.utils.data.RandomSampler(ds, generator=torch.Generator().manual_seed(0))
    loader = DataLoader(ds, batch_size=8, sampler=shuffle, collate_fn=collate)
    for frames, y in loader:
        # seven features per point, but a clip has 8 mel bands: the first batch fails, so its
        # shape is one the program never varied (a later batch would let the rows vary)
        xyz = frames.view(-1, 7)
    """)
# --no-observed-sizes: a view error is raised from the batch's layout alone, and the
# batch drawn afresh (``torch.randn(171, 8).view(-1, 7)``) would leave no dataset to load
ARGS = ["-k", r"is invalid for input of size \d+", "--json", "-q", "--confirm", "0", "--verify", "1", "--no-extract",
        "--no-observed-sizes"]


def reduce(tmp_path, *extra):
    done = subprocess.run([sys.executable, "-m", "shrinkgpu", "reduce", "clips.py", *ARGS, *extra], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow
def test_the_dataset_is_loaded_beside_the_result_and_kept_built_on_request(tmp_path):
    (tmp_path / "clips.py").write_text(CLIPS)
    data = reduce(tmp_path, "-o", "out/clips.min.py")
    result = (tmp_path / "out" / "clips.min.py").read_text()
    # the constructor and its helper are gone; what the loader calls on the object stays
    assert "pickle.loads(pathlib.Path(__file__).with_name('clips.min.ds.pkl').read_bytes())" in result
    assert "make_clip" not in result and "__init__" not in result
    assert "def __getitem__" in result and "def collate" in result
    assert data["loaded_objects"] == [
        {"file": "clips.min.ds.pkl", "name": "ds", "class": "Clips",
         "bytes": (tmp_path / "out" / "clips.min.ds.pkl").stat().st_size}
    ]
    assert "clips.min.ds.pkl" in data["needs"]
    assert data["verified_where_written"] == "reproduces there too"
    report = (tmp_path / "out" / "clips.min.md").read_text()
    assert "`clips.min.ds.pkl`: `ds` (a `Clips`" in report and "--no-load-objects" in report
    # plain python, from the result's directory: the same first error
    run = subprocess.run([sys.executable, "clips.min.py"], cwd=tmp_path / "out", capture_output=True, text=True)
    assert run.returncode == 1 and "is invalid for input of size" in run.stderr
    assert (tmp_path / "clips.py").read_text() == CLIPS

    kept = reduce(tmp_path, "-o", "kept/clips.min.py", "--no-load-objects")
    assert kept["loaded_objects"] == [] and not list((tmp_path / "kept").glob("*.pkl"))
    assert "Clips(" in (tmp_path / "kept" / "clips.min.py").read_text()


@pytest.mark.slow
def test_a_users_file_is_never_taken_and_a_later_run_to_the_same_output_replaces_its_own(tmp_path):
    (tmp_path / "clips.py").write_text(CLIPS)
    # a file of the user's named as the result's pickle would be, but not beside the result
    (tmp_path / "clips.min.ds.pkl").write_bytes(b"the user's own file")
    data = reduce(tmp_path, "-o", "out/clips.min.py")
    assert data["loaded_objects"] == [] and "pickle" not in (tmp_path / "out" / "clips.min.py").read_text()
    assert (tmp_path / "clips.min.ds.pkl").read_bytes() == b"the user's own file"
    # beside the result, the name is the result's, as clips.min.md is: written again
    (tmp_path / "clips.min.ds.pkl").unlink()
    assert reduce(tmp_path)["loaded_objects"] and reduce(tmp_path)["loaded_objects"]
    assert "pickle.loads" in (tmp_path / "clips.min.py").read_text()
