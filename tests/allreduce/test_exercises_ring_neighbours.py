"""Notebook 05's ring checker names a ring that talks to a rank other than its neighbours,
from the messages the ranks actually sent."""

from __future__ import annotations

import pytest
from wrong_allreduces import stride_two_ring, sums_on_rank_0_only

from course_utils.allreduce.exercises import _stray_message, check_ring

TIMEOUT = 3.0


def _line(capsys) -> str:
    return capsys.readouterr().out.strip().splitlines()[-1]


def _ring(peers: list[tuple[int, int]]) -> list[dict]:
    """Each rank's recorded messages: one send to the first peer, one receive from the second."""
    return [{"events": [("send", to, 8), ("recv", source, 0)]} for to, source in peers]


def test_a_ring_may_turn_either_way_but_not_skip_a_rank():
    assert _stray_message(_ring([(1, 3), (2, 0), (3, 1), (0, 2)])) is None  # to the right
    assert _stray_message(_ring([(3, 1), (0, 2), (1, 3), (2, 0)])) is None  # to the left
    skipping = _ring([(1, 3), (2, 0), (0, 1), (0, 2)])  # rank 2 sends to rank 0
    assert _stray_message(skipping) == "your ring talks to a non-neighbour: rank 2 sent to rank 0"
    deaf = _ring([(1, 2), (2, 0), (3, 1), (0, 2)])  # rank 0 receives from rank 2
    assert _stray_message(deaf) == "your ring talks to a non-neighbour: rank 0 received from rank 2"


@pytest.mark.parametrize(
    "mistake, stray",
    [(stride_two_ring, "rank 0 sent to rank 2"), (sums_on_rank_0_only, "rank 2 sent to rank 0")],
)
def test_a_ring_that_talks_to_a_non_neighbour_is_caught(capsys, mistake, stray):
    assert not check_ring(mistake, timeout=TIMEOUT)
    line = _line(capsys)
    assert line.startswith("✗ your ring talks to a non-neighbour"), line
    assert f"{stray} (tensor of 22 on 4 ranks)" in line and "(rank + 1) % N" in line
