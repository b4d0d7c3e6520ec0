"""A layer's neurons split over ranks behave exactly like the whole layer, forward and
backward, each rank stores its share, and the communication per layer is what it must be."""

from __future__ import annotations

import pytest
import torch.distributed as dist

from course_utils.core.errors import LaunchError
from course_utils.model_parallel import tensor_parallel as tp
from course_utils.ranks.launch import launch

WIDTHS = [40, 64, 64, 64, 12]  # four layers: two column-then-row pairs
BATCH = 16


@pytest.mark.parametrize("style", tp.STYLES)
@pytest.mark.parametrize("ranks", [2, 4])
def test_split_layers_equal_the_unsplit_ones(style, ranks):
    reports = launch(tp.compare_with_unsplit, ranks, backend="gloo", args=(WIDTHS, BATCH, style))
    for r in reports:
        assert r["output_max_diff"] < 1e-5
        assert r["grad_max_diff"] < 1e-5


def test_each_rank_stores_its_share_of_the_weights():
    reports = launch(tp.compare_with_unsplit, 2, backend="gloo", args=(WIDTHS, BATCH, "column_row"))
    full = reports[0]["params_full"]
    row_biases = 64 + 12  # a row-parallel layer keeps its whole bias on every rank
    for r in reports:
        assert r["params_stored"] == (full - row_biases) // 2 + row_biases


def test_communication_per_layer_is_measured_exactly():
    split = {
        s: launch(tp.compare_with_unsplit, 2, backend="gloo", args=(WIDTHS, BATCH, s))[0]
        for s in tp.STYLES
    }
    every = tp.bytes_per_layer(split["every_layer"]["transfers"], 4)
    pairs = tp.bytes_per_layer(split["column_row"]["transfers"], 4)
    feature = BATCH * 4  # bytes per feature of a float32 batch
    gather, reduce = feature / 2, feature  # on 2 ranks a ring sends (N-1)/N, 2(N-1)/N of n
    assert every["forward"] == [64 * gather, 64 * gather, 64 * gather, 12 * gather]
    assert every["backward"] == [40 * reduce, 64 * reduce, 64 * reduce, 64 * reduce]
    assert pairs["forward"] == [0, 64 * reduce, 0, 12 * reduce]  # the last layer is row-parallel
    assert pairs["backward"] == [40 * reduce, 0, 64 * reduce, 0]
    assert tp.collectives_per_layer(split["every_layer"]["transfers"], 4) == {
        "forward": [1, 1, 1, 1],
        "backward": [1, 1, 1, 1],
    }
    assert tp.collectives_per_layer(split["column_row"]["transfers"], 4) == {
        "forward": [0, 1, 0, 1],
        "backward": [1, 0, 1, 0],
    }


def _uneven_split():
    from torch import nn

    return tp.parallelize(nn.Sequential(nn.Linear(8, 6)), "every_layer") and dist.get_rank()


def test_a_width_that_does_not_split_evenly_is_refused():
    with pytest.raises(LaunchError, match="6 output neurons cannot be split evenly over 4 ranks"):
        launch(_uneven_split, 4, backend="gloo", timeout=30)


def test_unknown_style_is_refused():
    with pytest.raises(ValueError, match="unknown style 'diagonal'"):
        tp.parallelize(None, "diagonal")
