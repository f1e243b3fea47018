"""probe/objects.py with real processes: the user's data objects alive at the first
error, and what the user's data helpers returned, pickled; nothing unless asked.
"""

from __future__ import annotations

import pickle
from pathlib import Path

from worker.probe.helpers import watched


def test_the_users_data_objects_alive_at_the_error_are_saved_and_models_and_configs_are_not(runner, tmp_path):
    obs = watched(runner, """\
        import numpy as np
        import torch
        class Config:
            def __init__(self):
                self.lr, self.sizes = 0.1, [1, 2]
        class Clouds(torch.utils.data.Dataset):
            def __init__(self, n, seed):
                rng = np.random.default_rng(seed)
                self.clouds = [rng.normal(size=(int(rng.integers(3, 9)), 3)) for _ in range(n)]
        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.rows = list(range(20))
                self.lin = torch.nn.Linear(3, 2)
        class Holder:
            def __init__(self):
                self.rows = list(range(20))
                self.fn = lambda x: x
        def main():
            cfg, net, held = Config(), Net(), Holder()
            train = Clouds(20, seed=1)
            torch.cat([torch.from_numpy(c) for c in train.clouds]).view(-1, 4)
        main()
        """, save_objects=str(tmp_path / "objects"))
    assert obs.signature.type == "RuntimeError"
    # the config holds no data, the model is configuration, the lambda cannot be pickled
    assert [(o["name"], o["class"]) for o in obs.saved_objects] == [("train", "Clouds")]
    saved = obs.saved_objects[0]
    assert Path(saved["path"]).stat().st_size == saved["bytes"]
    # a class of ``__main__``, referred to by name: the result that loads it defines it
    data = Path(saved["path"]).read_bytes()
    assert b"__main__" in data and b"Clouds" in data and b"clouds" in data


def test_an_object_holding_one_large_array_is_saved_whole(runner, tmp_path):
    # pickle's protocol 5 writes a large array's memory as a PickleBuffer, not bytes
    obs = watched(runner, """\
        import numpy as np
        class Points:
            def __init__(self, n):
                self.x = np.random.default_rng(3).normal(size=(n, 4)).astype(np.float32)
        points = Points(4096)
        points.x[4096]
        """, save_objects=str(tmp_path / "objects"))
    assert obs.signature.type == "IndexError"
    [saved] = obs.saved_objects
    assert (saved["name"], saved["class"]) == ("points", "Points")
    assert Path(saved["path"]).stat().st_size == saved["bytes"] > 4096 * 4 * 4


def test_what_the_users_data_helpers_returned_is_saved_when_the_run_was_long_enough(runner, tmp_path):
    src = """\
        import pickle
        import random
        import torch
        def build(n):
            rng = random.Random(1)
            rows = [(str(rng.random()), [1, 2]) for _ in range(n)]
            return rows[:n // 2], rows[n // 2:], torch.arange(n)
        def make_model():
            return torch.nn.Linear(2, 2)
        def main():
            train, test, ids = build(40)
            model = make_model()                # a module: configuration, not data
            short = build(4)                    # a tuple of three: one name, no data of its own
            pairs = dict(zip(range(3), "abc"))  # not a helper of the user's
            ids[40]
        main()
        """
    obs = watched(runner, src, save_objects=str(tmp_path / "objects"), save_results_after=0.0)
    assert obs.signature.type == "IndexError"
    [saved] = obs.saved_objects
    assert (saved["name"], saved["targets"], saved["class"]) == ("train", ["train", "test", "ids"], "build()")
    train, test, ids = pickle.loads(Path(saved["path"]).read_bytes())
    assert len(train) == len(test) == 20 and ids.tolist() == list(range(40))
    # a run that failed sooner than asked saves no helper's result
    obs = watched(runner, src, save_objects=str(tmp_path / "objects-2"), save_results_after=60.0)
    assert obs.signature.type == "IndexError" and obs.saved_objects == ()


def test_no_object_is_saved_unless_asked(runner):
    obs = watched(runner, """\
        class Rows:
            def __init__(self):
                self.rows = list(range(20))
        rows = Rows()
        rows.rows[20]
        """)
    assert obs.signature.type == "IndexError" and obs.saved_objects == ()
