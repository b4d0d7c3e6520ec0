"""The memory exercise's checker: the reference solution passes, each classic mistake is named."""

from __future__ import annotations

from reference import load_solution

from course_utils.core.checks import NOT_SOLVED
from course_utils.mesh.plan_exercises import check_memory_per_rank

reference = load_solution("11_mesh.py").memory_per_rank


def test_reference_solution_passes():
    assert check_memory_per_rank(reference)


def test_stub_is_not_solved_yet(capsys):
    def stub(params, dp, tp, pp, zero_stage, precision):
        raise NotImplementedError

    assert not check_memory_per_rank(stub)
    assert not check_memory_per_rank(None)
    assert capsys.readouterr().out.count(NOT_SOLVED) == 2


def test_forgetting_tp_and_pp_is_named(capsys):
    assert not check_memory_per_rank(lambda n, dp, tp, pp, z, p: reference(n, dp, 1, 1, z, p))
    assert "did not divide by TP x PP" in capsys.readouterr().out


def test_sharding_the_optimizer_without_zero_is_named(capsys):
    assert not check_memory_per_rank(
        lambda n, dp, tp, pp, z, p: reference(n, dp, tp, pp, max(z, 1), p)
    )
    assert "without ZeRO" in capsys.readouterr().out


def test_no_master_copy_is_named(capsys):
    def no_master(params, dp, tp, pp, zero_stage, precision):
        full = reference(params, dp, tp, pp, zero_stage, precision)
        if precision == "bf16":
            full -= 4 * params / (tp * pp) / (dp if zero_stage >= 1 else 1)
        return full

    assert not check_memory_per_rank(no_master)
    assert "no fp32 master copy" in capsys.readouterr().out


def test_other_wrong_answers_show_the_expected_value(capsys):
    assert not check_memory_per_rank(lambda *case: 1.0)
    assert "the planner counts" in capsys.readouterr().out


def test_a_non_number_or_a_crash_is_reported(capsys):
    assert not check_memory_per_rank(lambda *case: "80 GB")
    assert not check_memory_per_rank(lambda *case: 1 / 0)
    out = capsys.readouterr().out
    assert "a number of bytes" in out and "ZeroDivisionError" in out


def test_the_course_s_own_formula_is_refused(capsys):
    from course_utils.core.own_answers import message
    from course_utils.memory.formulas import model_state_bytes

    def wrapped(params, dp, tp, pp, zero_stage, precision):
        key = "mixed" if precision == "bf16" else precision
        return model_state_bytes(params / (tp * pp), dp, zero_stage, key)

    assert not check_memory_per_rank(wrapped)
    assert not check_memory_per_rank(model_state_bytes)
    assert capsys.readouterr().out.count(message("model-state formula")) == 2
