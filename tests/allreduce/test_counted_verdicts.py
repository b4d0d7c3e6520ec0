"""05's verdicts on what the recorder counted, fed as the notebook feeds them: rows from
`compare_with_builtin`, with an algorithm swapped for one that sums wrongly or sends more
than its formula, and each verdict prints ✗ (a small run: 4 ranks, two lengths)."""

from __future__ import annotations

import pytest
from wrong_allreduces import sums_on_rank_0_only, whole_tensor_ring

from course_utils.allreduce import algorithms, compare_with_builtin, traced_run
from course_utils.allreduce import counted_verdicts as counted
from course_utils.parallel.allreduce import butterfly_allreduce

NUMELS, DTYPES = (5, 1001), ("float32", "int64")


def _rows(world_size=4, names=tuple(algorithms.ALGORITHMS)):
    return compare_with_builtin((world_size,), NUMELS, DTYPES, algorithms=names)


def test_the_course_algorithms_pass_every_counted_verdict(capsys):
    rows = [r for n in (2, 4) for r in _rows(n)]
    assert counted.equal_builtin(rows) and counted.counted_as_formulas(rows)
    hd = [r for n in (2, 4) for r in _rows(n, ("halving_doubling",))]
    assert counted.halving_doubling_holds(traced_run("halving_doubling", _QUARTET), hd)
    out = capsys.readouterr().out
    assert "✗" not in out and "not so" not in out
    assert "parameter_server, tree, butterfly and ring each equal dist.all_reduce" in out


def test_a_ring_that_sums_on_rank_0_only_is_not_equal(monkeypatch, capsys):
    monkeypatch.setitem(algorithms.ALGORITHMS, "ring", sums_on_rank_0_only)
    assert not counted.equal_builtin(_rows(names=("ring",)))
    assert "✗ ring equals dist.all_reduce" in capsys.readouterr().out


def test_a_ring_that_sends_the_whole_tensor_is_counted_above_the_floor(monkeypatch, capsys):
    monkeypatch.setitem(algorithms.ALGORITHMS, "ring", whole_tensor_ring)
    rows = _rows()
    assert all(r["equal"] for r in rows)  # the sums are right, to rounding: the counts tell
    assert not counted.counted_as_formulas(rows)
    assert counted.busiest_share(rows, "ring")[4] == pytest.approx(3.0)  # N - 1 messages
    assert "✗ every algorithm took the rounds" in capsys.readouterr().out


def test_a_butterfly_passed_off_as_halving_doubling_fails_with_its_parts_named(monkeypatch, capsys):
    monkeypatch.setitem(algorithms.POWER_OF_TWO, "halving_doubling", butterfly_allreduce)
    rows = _rows(names=("halving_doubling",))
    assert not counted.halving_doubling_holds(traced_run("halving_doubling", _QUARTET), rows)
    out = capsys.readouterr().out
    assert "not so: after the halving, rank r holds the sum of chunk r only" in out
    assert "not so: busiest rank on the floor" in out
    assert "not so: equal to dist.all_reduce" not in out  # the butterfly sums right
    assert "✗ halving-doubling" in out


def test_the_floor_and_its_slack_for_uneven_chunks():
    assert counted.floor(2) == 1.0 and counted.floor(4) == 1.5
    assert counted.on_floor({4: 1.5 + 8 / 1001}, 1001)
    assert not counted.on_floor({4: 1.5 + 9 / 1001}, 1001)


_QUARTET = [[r + 1] * 4 for r in range(4)]
