"""The checkers accept the reference solutions and name each mistake."""

from __future__ import annotations

import torch
import torch.distributed as dist
from reference import load_solution

from course_utils.failures import exercises


def _solutions():
    return load_solution("09_failures.py")


def test_the_reference_solutions_pass(capsys):
    solutions = _solutions()
    assert exercises.check_resume(solutions.resume)
    assert exercises.check_slowest_rank(solutions.slowest_rank)
    assert capsys.readouterr().out.count("✓") == 2


def _without(part):
    def resume(model, optimizer, batches, saved):
        if part != "model":
            model.load_state_dict(saved["model"])
        if part != "optimizer":
            optimizer.load_state_dict(saved["optimizer"])
        if part != "sampler":
            batches.load_state_dict(saved["sampler"])
        if part != "rng":
            torch.set_rng_state(saved["rng"])
        return saved["step"]

    return resume


def test_the_resume_checker_names_each_forgotten_part(capsys):
    for part, words in (("optimizer", "optimizer"), ("sampler", "epoch"), ("rng", "RNG")):
        assert not exercises.check_resume(_without(part))
        assert words in capsys.readouterr().out


def test_the_resume_checker_catches_a_restore_on_rank_0_only(capsys):
    def rank_0_only(model, optimizer, batches, saved):
        if dist.get_rank() == 0:
            model.load_state_dict(saved["model"])
            optimizer.load_state_dict(saved["optimizer"])
            batches.load_state_dict(saved["sampler"])
            torch.set_rng_state(saved["rng"])
        return saved["step"]

    assert not exercises.check_resume(rank_0_only)
    assert "rank 1 did not restore" in capsys.readouterr().out


def test_an_unsolved_exercise_says_so(capsys):
    def stub(*args):
        raise NotImplementedError

    assert not exercises.check_resume(stub) and not exercises.check_slowest_rank(stub)
    assert capsys.readouterr().out.count("✗ not solved yet") == 2


def test_the_straggler_checker_names_the_usual_mistakes(capsys):
    assert not exercises.check_slowest_rank(lambda t: max(t, key=lambda r: t[r]["wait"]))
    assert "waits longest" in capsys.readouterr().out
    assert not exercises.check_slowest_rank(lambda t: max(t, key=lambda r: t[r]["step"]))
    assert "step time cannot tell" in capsys.readouterr().out


def test_a_step_typed_in_fails_at_the_second_checkpoint(capsys):
    first, second = exercises.SAVES_AT

    def returns_the_first_step(model, optimizer, batches, saved):
        _without(None)(model, optimizer, batches, saved)
        return first

    assert not exercises.check_resume(returns_the_first_step)
    assert capsys.readouterr().out.strip().splitlines()[-1] == (
        "✗ return the step the checkpoint was saved at, saved['step'] (it was saved at "
        f"{second}, you returned {first})"
    )


def test_a_straggler_finder_that_raises_is_named_not_a_traceback(capsys):
    assert not exercises.check_slowest_rank(lambda t: t["no such rank"])
    assert "✗ slowest_rank raised KeyError: 'no such rank'" in capsys.readouterr().out
