"""No notebook shows an exercise's answer above the exercise, in its text or its stored outputs.

The answers are the values each checker expects for the cases it tries, listed by the
chapter's `answer_values()` from the course's own formulas, and the formulas and sentences
that state an answer, listed by its `answer_phrases()`; `course.revealed` says what
counts as showing one. An exercise whose answer is a tensor, an order of operations or a
config has no value a text could state, and says so in NOT_VALUES.
"""

from __future__ import annotations

import nbformat
import pytest

from course_utils.course.exercise_cells import Exercise, exercises
from course_utils.course.notebook_files import course_notebooks
from course_utils.course.revealed import answers_for, leaks, numbers, phrases_for, plain, said

NOT_VALUES = {  # (notebook number, exercise): why its checker lists no answer values
    ("01", "sgd_epoch"): "a weight vector after one pass",
    ("01", "sweep_config"): "a config, whose every value the exercise's text gives",
    ("04", "average_gradients"): "trains in place and returns nothing",
    ("05", "ring"): "a summed tensor",
    ("05", "tree"): "a summed tensor",
    ("06", "gpipe_order"): "an order of operations",
    ("06", "interleaved_order"): "an order of operations",
    ("06", "split_backward"): "an order of operations",
    ("07", "staleness"): "a list per server log",
    ("08", "shard_optimizer"): "a parameter tensor",
    ("09", "resume"): "restores state; the step it returns is given to it",
    ("09", "slowest_rank"): "a rank of a random table",
    ("10", "f_and_g"): "two autograd functions",
    ("10", "merge"): "tensors",
    ("10", "block_mask"): "a mask",
    ("10", "combine"): "a tensor",
    ("11", "mesh_groups"): "lists of rank groups",
}
REVEALED: dict[tuple[str, str], str] = {}  # shown today, to be fixed; the mark is strict
PLANTED = {  # (notebook, exercise): a leak as a reading of the notebooks found it (issue #39)
    (
        "01",
        "sweep_config",
    ): 'ranges such as `{"min": 1e-3, "max": 1e-1, "distribution": "log_uniform"}`',
    (
        "03",
        "curve_distance",
    ): "the distance is the mean over epochs of the absolute gap between two\nper-epoch losses",
    ("06", "bubble"): "matched it on both, while $\\frac{K - 1}{M + K - 1}$ holds only as far as "
    "the stages are equal",
    ("09", "slowest_rank"): "so the step time cannot tell which rank is slow:\nthe slow one is the "
    "rank that **waits least**.",
    ("10", "f_and_g"): "f and g are conjugate: one is the identity\n  where the other all-reduces.",
    ("11", "memory_per_rank"): "model states from chapter 08's formulas on a 1/(TP·PP) shard (and\n"
    "  ZeRO's 1/DP)",
}


def _exercises() -> list[tuple[str, object, Exercise]]:
    found = []
    for path in course_notebooks():
        nb = nbformat.read(path, as_version=4)
        found += [(path.name[:2], nb, exercise) for exercise in exercises(nb)]
    return found


EXERCISES = _exercises()


def _case(number: str, nb, exercise: Exercise):
    marks = ()
    if (number, exercise.name) in REVEALED:
        marks = pytest.mark.xfail(strict=True, reason=REVEALED[number, exercise.name])
    return pytest.param(nb, exercise, id=f"{number}-{exercise.name}", marks=marks)


def test_every_notebook_from_00_to_11_has_its_exercises_found():
    assert sorted({number for number, _, _ in EXERCISES}) == [f"{n:02d}" for n in range(12)]


@pytest.mark.parametrize(
    "number, nb, exercise", [pytest.param(*e, id=f"{e[0]}-{e[2].name}") for e in EXERCISES]
)
def test_every_exercise_lists_its_answer_values_or_says_why_not(number, nb, exercise):
    answers = answers_for(nb.cells[exercise.index].source)
    if (number, exercise.name) in NOT_VALUES:
        assert answers is None, f"{number} {exercise.name} lists values: take it off NOT_VALUES"
    else:
        assert answers, f"{number} {exercise.name}: add its cases to answer_values()"


@pytest.mark.parametrize(
    "nb, exercise",
    [_case(n, nb, e) for n, nb, e in EXERCISES if (n, e.name) not in NOT_VALUES],
)
def test_no_cell_above_an_exercise_shows_its_answer(nb, exercise):
    found = leaks(nb, exercise, answers_for(nb.cells[exercise.index].source))
    assert not found, "\n".join(str(leak) for leak in found)


@pytest.mark.parametrize(
    "nb, exercise",
    [
        pytest.param(nb, e, id=f"{n}-{e.name}")
        for n, nb, e in EXERCISES
        if phrases_for(nb.cells[e.index].source)
    ],
)
def test_no_cell_above_an_exercise_states_its_answer_in_words(nb, exercise):
    found = said(nb, exercise, phrases_for(nb.cells[exercise.index].source))
    assert not found, "\n".join(str(leak) for leak in found)


def _planted(number: str, name: str, text: str):
    """The notebook as stored, with `text` in a markdown cell at its top."""
    nb, exercise = next((nb, e) for n, nb, e in EXERCISES if (n, e.name) == (number, name))
    planted = nbformat.from_dict(nb)
    planted.cells = [nbformat.v4.new_markdown_cell(text), *nb.cells]
    return planted, Exercise(exercise.index + 1, exercise.name, exercise.defines)


@pytest.mark.parametrize("number, name", [pytest.param(*key, id="-".join(key)) for key in PLANTED])
def test_each_leak_found_by_a_reading_is_caught_when_planted_above_its_exercise(number, name):
    nb, exercise = _planted(number, name, PLANTED[number, name])
    found = said(nb, exercise, phrases_for(nb.cells[exercise.index].source))
    assert [leak.cell for leak in found] == [0] * len(found) and found


def test_the_exercise_may_state_what_it_defines_but_not_above_its_statement():
    statement = "## Exercises\n\n**2.** Write the mean over epochs of the absolute gap."
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(statement)])
    nb.cells.append(nbformat.v4.new_code_cell("x.check_y(f)"))
    assert said(nb, Exercise(1, "y", ()), ["mean over epochs of the absolute gap"]) == []
    nb.cells[0].source = "The mean over epochs of the absolute gap.\n\n" + statement
    assert len(said(nb, Exercise(1, "y", ()), ["mean over epochs of the absolute gap"])) == 1


def test_plain_reads_a_formula_however_it_is_typeset():
    written = [
        "(K-1)/(M+K-1)",
        "$\\frac{K - 1}{M + K - 1}$",
        "(K − 1) / (M + K − 1)",
        "**(k-1)/(m+k-1)**",
    ]
    assert {plain(text) for text in written} == {"(k-1)/(m+k-1)"}
    assert plain("1/(TP·PP)") == plain("1/(TP × PP)") == "1/(tp*pp)"


def _shown(text: str, answers) -> list[str]:
    cell = nbformat.v4.new_markdown_cell(text)
    nb = nbformat.v4.new_notebook(cells=[cell, nbformat.v4.new_code_cell("x.check_y(f)")])
    return [leak.shown for leak in leaks(nb, Exercise(1, "y", ()), answers)]


def test_a_short_answer_counts_only_beside_its_case():
    answers = [((3,), 9), ((4,), 16)]
    assert _shown("the largest square (with 4 ranks: 16 on every rank)", answers) == ["16"]
    assert _shown("batch sizes 8, 16 and 64 on 2 ranks", answers) == []
    assert _shown("with 4 ranks it takes 16.2 ms", answers) == []


def test_a_long_answer_counts_anywhere_at_the_precision_shown():
    bubble = [((4, 16), 3 / 19)]
    assert _shown("predicted 0.158 (+11.4%)", bubble) == ["0.158"]
    assert _shown("a bubble of 15.8%", bubble) == ["15.8%"]
    assert _shown("predicted 0.16", bubble) == []  # two digits, without its case
    server = [((3, 7434, 4), 178_416)]
    assert _shown("parameter server: 119 kB, 178 kB, 238 kB", server) == ["178 kB"]
    assert _shown("178,416 bytes", server) == ["178,416"]
    assert _shown("178 ms per update", server) == []  # a time is a measurement
    assert _shown("M= 8: measured 0.158, predicted 0.273", bubble) == []  # so is a measured one
    assert _shown("measured: 0.158", bubble) == []


def test_numbers_read_units_and_precision():
    (percent,) = numbers("15.8%")
    assert percent.value == pytest.approx(0.158) and percent.half_step == pytest.approx(0.0005)
    (gigabytes,) = numbers("17.5 GB")
    assert gigabytes.value == pytest.approx(17.5e9) and gigabytes.digits == 3
    assert [n.text for n in numbers("step 3, 2.5 s, 12 x, v2 and 1e-3")] == ["3", "1e-3"]
