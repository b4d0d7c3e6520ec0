"""The allreduce algorithms against dist.all_reduce (their serial twin), and the cost model."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from recorded_bars import last_states, record_rank_bars

from course_utils.allreduce import cost_model
from course_utils.allreduce.algorithms import ALGORITHMS, chunk_bounds, summed
from course_utils.allreduce.runs import compare_with_builtin, pingpong, time_allreduce, traced_run
from course_utils.core.errors import LaunchError
from course_utils.ranks.launch import launch


@pytest.mark.parametrize("world_size", [1, 2, 3, 4, 5, 8])
def test_every_algorithm_equals_builtin(world_size):
    rows = compare_with_builtin((world_size,), (1, 3, 11, 257), ("float32", "float64", "int64"))
    assert len(rows) == 4 * 3 * len(ALGORITHMS)
    for row in rows:
        assert row["equal"] and row["ranks_agree"], row
        if row["dtype"] == "int64":
            assert row["max_abs_error"] == 0
        itemsize = {"float32": 4, "float64": 8, "int64": 8}[row["dtype"]]
        assert row["rounds"] == cost_model.rounds(row["algorithm"], world_size)
        expected = cost_model.bytes_per_rank(row["algorithm"], world_size, row["numel"], itemsize)
        assert row["bytes"] == expected, row["algorithm"]


@pytest.mark.parametrize("world_size", [1, 2, 4, 8])
def test_halving_doubling_equals_builtin_on_the_rings_bytes_in_2_log2_n_rounds(world_size):
    numels = (1, 3, 11, 257, 1024)  # fewer elements than ranks, uneven chunks, even ones
    rows = compare_with_builtin(
        (world_size,), numels, ("float32", "int64"), algorithms=("halving_doubling",)
    )
    assert len(rows) == len(numels) * 2
    levels = world_size.bit_length() - 1
    for row in rows:
        assert row["equal"] and row["ranks_agree"], row
        itemsize = 4 if row["dtype"] == "float32" else 8
        assert row["rounds"] == cost_model.rounds("halving_doubling", world_size) == 2 * levels
        expected = cost_model.bytes_per_rank("halving_doubling", world_size, row["numel"], itemsize)
        assert row["bytes"] == expected
        if row["numel"] == 1024:  # even chunks: every rank sends and receives the ring's floor
            floor = cost_model.bandwidth_floor_bytes(world_size, 1024 * itemsize)
            assert all(sent == received == floor for sent, received in row["bytes"])


def test_halving_doubling_worked_example_and_its_refusal_of_other_n():
    traces = traced_run("halving_doubling", [[r + 1] * 4 for r in range(4)])
    assert len(traces[0].rounds) - 1 == 4  # 2 halving rounds, 2 doubling rounds
    halved = [t.rounds[2].value.tolist() for t in traces]
    assert all(row[r] == 10 and row.count(10) == 1 for r, row in enumerate(halved))
    assert [t.rounds[-1].value.tolist() for t in traces] == [[10] * 4] * 4
    with pytest.raises(LaunchError, match="power-of-two number of ranks, not 3"):
        traced_run("halving_doubling", [[1], [2], [3]], timeout=30)
    with pytest.raises(ValueError, match="power-of-two number of ranks, not 6"):
        cost_model.rounds("halving_doubling", 6)


def _non_contiguous_and_2d() -> list:
    rank = dist.get_rank()
    out = []
    for name in ALGORITHMS:
        grid = torch.arange(12, dtype=torch.int64).reshape(3, 4) * (rank + 1)
        transposed = grid.clone().t()  # not contiguous: the sum must land in it all the same
        returned = summed(name, transposed)
        out.append((name, returned is transposed, transposed.clone(), summed(name, grid)))
    return out


def test_shapes_and_non_contiguous_tensors_are_summed_in_place():
    per_rank = launch(_non_contiguous_and_2d, 3, backend="gloo")
    base = torch.arange(12, dtype=torch.int64).reshape(3, 4)
    for name, same_object, transposed, grid in per_rank[1]:
        assert same_object, name
        assert torch.equal(transposed, base.t() * 6), name
        assert torch.equal(grid, base * 6), name


def test_lecture_tree_partial_sums():
    traces = traced_run("tree", [[r + 1] for r in range(7)])
    after = [[int(t.rounds[i].value) for t in traces] for i in range(len(traces[0].rounds))]
    assert after[1] == [1, 2, 3, 4, 8, 13, 7]
    assert after[2][-1] == 28
    assert after[-1] == [28] * 7
    assert len(traces[0].rounds) - 1 == cost_model.rounds("tree", 7)


def test_butterfly_and_ring_worked_examples():
    butterfly = traced_run("butterfly", [[r + 1] for r in range(4)])
    assert [int(t.rounds[1].value) for t in butterfly] == [3, 3, 7, 7]
    assert [int(t.rounds[2].value) for t in butterfly] == [10] * 4
    ring = traced_run("ring", [[r + 1] * 4 for r in range(4)])
    scattered = [t.rounds[3].value.tolist() for t in ring]
    assert all(row[r] == 10 for r, row in enumerate(scattered))
    assert [t.rounds[-1].value.tolist() for t in ring] == [[10] * 4] * 4


def test_butterfly_folds_in_ranks_beyond_a_power_of_two():
    """Ranks 4 and 5 hand theirs to 0 and 1 in round 1, while 2 and 3, with nothing to wait
    for, already swap theirs."""
    traces = traced_run("butterfly", [[r + 1] for r in range(6)])
    assert [int(t.rounds[1].value) for t in traces] == [6, 8, 7, 7, 5, 6]
    assert [int(t.rounds[-1].value) for t in traces] == [21] * 6


def test_the_ring_is_counted_at_the_boundary_round_by_round():
    traces = traced_run("ring", [[1.0] * 8 for _ in range(4)])
    for rank, trace in enumerate(traces):
        assert trace.bytes_sent == trace.bytes_received == 2 * 3 * 2 * 4  # 6 steps, 2 floats
        assert trace.messages_sent == 6
        assert [len(r.sends) for r in trace.rounds] == [0] + [1] * 6  # one chunk a round
        assert {peer for r in trace.rounds for peer, *_ in r.sends} == {(rank + 1) % 4}


def test_chunk_bounds_cover_everything_once():
    for numel in (0, 1, 3, 10, 11):
        for parts in (1, 2, 3, 4, 8):
            bounds = chunk_bounds(numel, parts)
            assert bounds[0][0] == 0 and bounds[-1][1] == numel
            assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:], strict=False))
            assert max(b - a for a, b in bounds) - min(b - a for a, b in bounds) <= 1


def _not_a_tensor():
    summed("ring", [1, 2, 3])


def test_a_list_is_refused_with_a_clear_message():
    with pytest.raises(LaunchError, match="needs a torch.Tensor"):
        launch(_not_a_tensor, 2, timeout=30, backend="gloo")


def test_unknown_algorithm_is_refused():
    with pytest.raises(ValueError, match="choose one of"):
        traced_run("hypercube", [[1], [2]])
    with pytest.raises(ValueError, match="unknown algorithm"):
        cost_model.rounds("hypercube", 4)


def test_model_formulas_and_crossover():
    model = cost_model.AlphaBeta(alpha=1e-4, beta=1e-9)
    n = 1 << 20
    assert cost_model.predicted_seconds("butterfly", 8, n, model) == pytest.approx(
        3 * (1e-4 + n * 1e-9)
    )
    ring = cost_model.predicted_seconds("ring", 8, n, model)
    assert ring == pytest.approx(14 * 1e-4 + 2 * 7 / 8 * n * 1e-9)
    assert cost_model.predicted_seconds("parameter_server", 4, n, model) == pytest.approx(
        6 * (1e-4 + n * 1e-9)
    )
    # halving-doubling: the butterfly's log2 N rounds twice, the ring's bytes
    assert cost_model.predicted_seconds("halving_doubling", 8, n, model) == pytest.approx(
        6 * 1e-4 + 2 * 7 / 8 * n * 1e-9
    )
    assert cost_model.predicted_seconds("halving_doubling", 8, n, model) < ring
    # the ring sends the floor; every other algorithm's busiest rank sends more from N = 3 on
    floor = cost_model.bandwidth_floor_bytes(8, 8000)
    assert max(s for s, _ in cost_model.bytes_per_rank("ring", 8, 1000, 8)) == floor
    assert max(s for s, _ in cost_model.bytes_per_rank("halving_doubling", 8, 1000, 8)) == floor
    for name in ("parameter_server", "tree", "butterfly"):
        assert max(s for s, _ in cost_model.bytes_per_rank(name, 8, 1000, 8)) > floor
    cross = cost_model.crossover_bytes("butterfly", "ring", 8, model)
    below = cost_model.predicted_seconds("ring", 8, cross / 2, model)
    assert below > cost_model.predicted_seconds("butterfly", 8, cross / 2, model)
    above = cost_model.predicted_seconds("ring", 8, cross * 2, model)
    assert above < cost_model.predicted_seconds("butterfly", 8, cross * 2, model)


def test_fit_alpha_beta_recovers_a_line():
    sizes = [1 << 10, 1 << 16, 1 << 20, 1 << 24]
    model = cost_model.fit_alpha_beta(sizes, [2e-5 + n * 5e-10 for n in sizes])
    assert model.alpha == pytest.approx(2e-5, rel=1e-6)
    assert model.beta == pytest.approx(5e-10, rel=1e-6)
    with pytest.raises(ValueError, match="at least two"):
        cost_model.fit_alpha_beta([1], [1.0])


def test_pingpong_and_timing_return_positive_medians():
    pp = pingpong((1 << 10, 1 << 16), repeats=2)
    assert len(pp) == 2 and all(s > 0 for s in pp)
    table = time_allreduce(2, (1 << 10, 1 << 14), repeats=2)
    assert set(table) == {*ALGORITHMS, "builtin"}
    assert all(len(v) == 2 and min(v) > 0 for v in table.values())


def test_rank_0_counts_the_timing_rounds_also_those_a_slow_link_skips(monkeypatch):
    states = record_rank_bars(monkeypatch)
    time_allreduce(2, (1 << 10, 1 << 14), repeats=2, algorithms=("ring",), link="real")
    real = last_states(states)["all-reduce on 2 ranks"]
    assert (real["unit"], real["total"], real["n"], real["closed"]) == ("round", 6, 6, True)
    states.clear()  # over a slow emulated link, a size whose timed round is long is timed once
    time_allreduce(2, (1 << 16,), repeats=3, algorithms=("ring",), link="2mbit,1ms")
    assert [s["n"] for s in states] == [1, 2, 4, 4] and states[-1]["closed"]
