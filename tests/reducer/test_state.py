"""Where the state at the failing step is saved (reducer/state.py)."""

from __future__ import annotations

import ast
import dataclasses
import textwrap

from shrinkgpu.reducer.state import loop_names, state_point
from shrinkgpu.worker import Observation

SRC = textwrap.dedent(
    """\
    import torch


    class Net(torch.nn.Module):
        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x


    def train(model, loader, opt):
        history = []
        for epoch in range(10):
            for i, (x, y) in enumerate(loader):
                loss = model(x).sum()
                history.append(loss.item())
                self_check = loss.detach()
                opt.step()
        return history
    """
)
LINES = SRC.splitlines()


def line(code: str) -> int:
    return next(i + 1 for i, text in enumerate(LINES) if text.strip().startswith(code))


def observed(*loops) -> Observation:
    return dataclasses.replace(Observation.infrastructure("x"), loops=tuple(loops))


def test_the_outermost_frame_past_its_first_iteration_and_its_innermost_loop():
    # frames outermost first: train()'s two loops, then forward()'s
    obs = observed(
        ("a.py", line("for epoch"), 6), ("a.py", line("for i, (x, y)"), 17), ("a.py", line("for layer"), 3),
    )
    point = state_point(obs, {"a.py": SRC}, "a.py")
    assert point.header == line("for i, (x, y)")
    assert point.header_text == "for i, (x, y) in enumerate(loader):"
    assert point.iteration == 17
    assert point.iterations == ((line("for epoch"), 6), (line("for i, (x, y)"), 17))
    assert {"epoch", "i", "x", "y", "loss", "history", "self_check"} <= set(point.names)


def test_a_failure_in_the_first_iteration_everywhere_has_nothing_to_skip():
    obs = observed(("a.py", line("for epoch"), 0), ("a.py", line("for i, (x, y)"), 0))
    assert "first iteration" in state_point(obs, {"a.py": SRC}, "a.py")
    assert "no for loop" in state_point(observed(), {"a.py": SRC}, "a.py")


def test_a_frame_in_its_first_iteration_gives_way_to_the_next_one():
    obs = observed(("a.py", line("for epoch"), 0), ("a.py", line("for i, (x, y)"), 0), ("a.py", line("for layer"), 2))
    point = state_point(obs, {"a.py": SRC}, "a.py")
    assert (point.header, point.iteration) == (line("for layer"), 2)


def test_loops_of_a_module_in_another_directory_are_not_saved_there():
    obs = observed(("pkg/train.py", 1, 3))
    assert "outside the main script's directory" in state_point(obs, {"pkg/train.py": "for a in b:\n    pass\n"},
                                                                "a.py")


def test_loop_names_are_what_the_loop_binds_or_changes_in_place():
    loop = ast.parse(textwrap.dedent(
        """\
        for step, batch in enumerate(loader):
            out = model(batch)
            self.global_step += 1
            losses.append(out)
            buf.mul_(0.9)
            cache[step] = out
            model.train()
        """
    )).body[0]
    assert loop_names(loop) == ("batch", "buf", "cache", "losses", "model.*", "out", "self.global_step", "step")


def test_a_first_iteration_after_a_loop_that_took_the_time_is_a_point_too():
    src = textwrap.dedent(
        """\
        for epoch in range(100):
            train(model)
        for batch in val_loader:
            evaluate(model, batch)
        """
    )
    obs = observed(("a.py", 3, 0))
    assert "first iteration" in state_point(obs, {"a.py": src}, "a.py")
    point = state_point(obs, {"a.py": src}, "a.py", hot=(("a.py", "for epoch in range(100):", 0.98),))
    assert (point.header_text, point.iteration, point.iterations) == ("for batch in val_loader:", 0, ((3, 0),))


def test_a_long_run_is_one_of_six_imports_of_torch_of_its_own_however_busy_the_machine():
    from shrinkgpu.limits import Limits
    from shrinkgpu.reducer.state import long_run

    idle, busy = Limits(), Limits()
    idle.paced(1.6)
    busy.paced(4.8)  # three times slower at everything
    # the README's fixture: 4.4 s, 1.6 of them importing torch; on a busy machine 13.2 s,
    # past the 10 s a fixed threshold once read, and still short
    assert not long_run(4.4, idle) and not long_run(13.2, busy)
    # a long suite's original: 46 s, three times that when busy
    assert long_run(46.0, idle) and long_run(138.0, busy)
