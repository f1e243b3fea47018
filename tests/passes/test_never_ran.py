"""never-ran (passes/never_ran.py): the statements after the failure that the original
never ran, and only those."""

from __future__ import annotations

from shrinkgpu.passes.never_ran import DeleteNeverRan
from shrinkgpu.syntax import Facts

from .helpers import after, dedent, start


def test_what_follows_the_failing_statement_up_to_the_top_goes():
    src = """\
    trainer = Trainer(model)
    if args.train:
        trainer.train()
        trainer.save_model("out")
    else:
        trainer.predict()
    trainer.evaluate()
    print("done")
    """
    cand = start(src, Facts(stack=(("a.py", 3),)))
    assert after(DeleteNeverRan(), cand) == dedent(
        """\
        trainer = Trainer(model)
        if args.train:
            trainer.train()
        else:
            trainer.predict()
        """
    )


def test_a_loops_later_statements_ran_in_earlier_iterations_and_stay():
    src = """\
    for epoch in range(10):
        train(epoch)
        evaluate(epoch)
    save()
    """
    cand = start(src, Facts(stack=(("a.py", 2),)))
    assert after(DeleteNeverRan(), cand) == "for epoch in range(10):\n    train(epoch)\n    evaluate(epoch)\n"


def test_a_try_around_the_failure_may_have_caught_it_and_nothing_goes():
    src = """\
    try:
        run()
        report()
    except ValueError:
        pass
    finish()
    """
    cand = start(src, Facts(stack=(("a.py", 2),)))
    assert DeleteNeverRan().units(cand, 0) == []
