"""The pipeline-cut exercise's checker: the reference passes, every named mistake is fed
and named, a hard-coded cut fails at the other sizes."""

from __future__ import annotations

from reference import load_solution

from course_utils.core.checks import NOT_SOLVED
from course_utils.mesh import stage_exercises
from course_utils.mesh.stage_exercises import CASES, check_stage_boundaries, slowest_stage

reference = load_solution("11_mesh.py").stage_boundaries


def test_reference_solution_passes_and_reaches_the_best_time():
    assert check_stage_boundaries(reference)
    for (costs, stages), (_, best) in zip(
        CASES, stage_exercises.answer_values()["stage_boundaries"], strict=True
    ):
        assert slowest_stage(costs, reference(costs, stages)) == best


def test_stub_is_not_solved_yet(capsys):
    def stub(layer_seconds, stages):
        raise NotImplementedError

    assert not check_stage_boundaries(stub)
    assert not check_stage_boundaries(None)
    assert capsys.readouterr().out.count(NOT_SOLVED) == 2


def test_equal_layer_counts_are_named(capsys):
    def equal(layer_seconds, stages):
        n = len(layer_seconds)
        return [round(s * n / stages) for s in range(1, stages)]

    assert not check_stage_boundaries(equal)
    assert "same number of layers" in capsys.readouterr().out


def test_filling_each_stage_to_the_average_is_named(capsys):
    def greedy(layer_seconds, stages):
        target, total, cuts = sum(layer_seconds) / stages, 0.0, []
        for i, seconds in enumerate(layer_seconds):
            if total + seconds > target and total > 0 and len(cuts) < stages - 1:
                cuts.append(i)
                total = 0.0
            total += seconds
        return cuts

    assert not check_stage_boundaries(greedy)
    assert "up to the average" in capsys.readouterr().out


def test_a_boundary_off_by_one_is_named(capsys):
    assert not check_stage_boundaries(lambda c, k: [i - 1 for i in reference(c, k)])
    assert "last layer of a stage" in capsys.readouterr().out


def test_a_hard_coded_cut_fails_at_the_other_sizes(capsys):
    first = reference(*CASES[0])
    assert not check_stage_boundaries(lambda c, k: list(first))
    assert "need" in capsys.readouterr().out  # the 4-stage case wants 3 boundaries


def test_malformed_answers_are_explained(capsys):
    assert not check_stage_boundaries(lambda c, k: "8")
    assert not check_stage_boundaries(lambda c, k: [0] * (k - 1))
    assert not check_stage_boundaries(lambda c, k: [1] * (k - 1) if k > 2 else [9])
    out = capsys.readouterr().out
    assert "list of layer indices" in out and "must increase" in out


def test_another_wrong_cut_shows_the_best_time(capsys):
    assert not check_stage_boundaries(lambda c, k: list(range(1, k)))
    assert "a cut exists whose slowest stage takes" in capsys.readouterr().out
