"""05's worked examples, traced as the notebook traces them, pass with the course's
algorithms and print ✗ with one swapped for an algorithm that sums in another pattern."""

from __future__ import annotations

from wrong_allreduces import chain_to_rank_0, stride_two_ring, sums_on_rank_0_only

from course_utils.allreduce import algorithms, traced_run
from course_utils.allreduce import walkthrough_verdicts as walk

ONES_TO_SEVEN = [[r + 1] for r in range(7)]
ONES_TO_FOUR = [[r + 1] for r in range(4)]
FOUR_COPIES = [[r + 1] * 4 for r in range(4)]


def test_the_course_algorithms_pass_their_worked_examples(capsys):
    assert walk.tree_example(traced_run("tree", ONES_TO_SEVEN))
    assert walk.butterfly_example(traced_run("butterfly", ONES_TO_FOUR))
    assert walk.ring_example(traced_run("ring", FOUR_COPIES))
    assert "✗" not in capsys.readouterr().out


def test_after_round_gives_numbers_for_one_element_and_lists_otherwise():
    assert walk.after_round(traced_run("butterfly", ONES_TO_FOUR), 0) == [1, 2, 3, 4]
    assert walk.after_round(traced_run("ring", FOUR_COPIES), -1) == [[10] * 4] * 4


def test_a_chain_passed_off_as_the_tree_fails(monkeypatch, capsys):
    monkeypatch.setitem(algorithms.ALGORITHMS, "tree", chain_to_rank_0)
    assert not walk.tree_example(traced_run("tree", ONES_TO_SEVEN))
    assert "✗ the tree" in capsys.readouterr().out


def test_a_parameter_server_passed_off_as_the_butterfly_fails(monkeypatch, capsys):
    monkeypatch.setitem(algorithms.ALGORITHMS, "butterfly", sums_on_rank_0_only)
    assert not walk.butterfly_example(traced_run("butterfly", ONES_TO_FOUR))
    assert "✗ the butterfly" in capsys.readouterr().out


def test_a_ring_with_the_wrong_neighbours_fails(monkeypatch, capsys):
    monkeypatch.setitem(algorithms.ALGORITHMS, "ring", stride_two_ring)
    assert not walk.ring_example(traced_run("ring", FOUR_COPIES))
    assert "✗ the ring" in capsys.readouterr().out
