"""FSDP2's sharded checkpoint of 4 ranks loads into 2, each holding other rows, and the run
ends where one unsharded process does; the claims fail for a DDP (replicated) checkpoint and
for a load that leaves the optimizer's state behind."""

from __future__ import annotations

import tempfile
from dataclasses import replace

import pytest

from course_utils.failures import charts, resharding, verdicts
from course_utils.failures.resume import RunConfig, checkpointed_training
from course_utils.parallel import checkpoint
from course_utils.ranks.launch import launch

SMALL = RunConfig(steps=16, every=None, hidden=16, train_samples=256, noise=0.0)


@pytest.fixture(scope="module")
def moved():
    return resharding.reshard(SMALL, 4, 2, save_at=8, timeout=60)


def test_four_fsdp_ranks_checkpoint_reshards_into_two_and_ends_like_one_process(moved):
    assert moved["start"] == 8 and moved["world_sizes"] == (4, 2)
    assert all(abs(share - 1 / 4) < 0.05 for share in moved["stored"][4]["shares"].values())
    assert moved["stored"][2]["shares"] == {0: pytest.approx(0.5), 1: pytest.approx(0.5)}
    assert (
        set(moved["stored"][4]["pieces"].values()) == {4} and len(moved["stored"][4]["pieces"]) == 6
    )
    # hidden 16: the first layer's 16 rows, 4 per rank, then 8; the last layer's 10: 3,3,3,1
    assert [s["net.1.weight"] for s in moved["shards"][4]] == [(4, 40)] * 4
    assert [s["net.1.weight"] for s in moved["shards"][2]] == [(8, 40)] * 2
    assert [s["net.5.bias"] for s in moved["shards"][4]] == [(3,), (3,), (3,), (1,)]
    assert moved["gap"] <= 1e-12
    assert verdicts.checkpoint_sharded(moved) and verdicts.reshard_matches(moved)


def test_a_load_that_leaves_the_optimizer_state_behind_ends_elsewhere():
    skipped = resharding.reshard(SMALL, 4, 2, save_at=8, parts=("model", "sampler"))
    assert skipped["gap"] > 1e-6
    assert not verdicts.reshard_matches(skipped)


def test_a_ddp_checkpoint_is_not_sharded(moved):
    with tempfile.TemporaryDirectory() as root:
        ddp = replace(SMALL, steps=4, every=4, checkpoint_dir=root)
        launch(checkpointed_training, 2, args=(ddp,), timeout=60)
        layout = resharding.stored_layout(checkpoint.step_folder(root, 4), 2)
    assert set(layout["pieces"].values()) == {1}  # DCP writes a replicated tensor once, whole
    assert sum(layout["shares"].values()) == pytest.approx(1.0)
    replicated = {**moved, "stored": {4: moved["stored"][4], 2: layout}}
    assert not verdicts.checkpoint_sharded(replicated)
    unmoved = {**moved, "shards": {4: moved["shards"][4], 2: moved["shards"][4][:2]}}
    assert not verdicts.checkpoint_sharded(unmoved)


def test_reshard_refuses_a_save_outside_the_run():
    with pytest.raises(ValueError, match="save_at=16 must lie between 0 and steps=16"):
        resharding.reshard(SMALL, 4, 2, save_at=16)


def test_the_shard_chart_titles_itself_from_the_rows_held(moved):
    fig = charts.shard_layout(moved)
    assert (
        fig._suptitle.get_text()
        == "net.1.weight: 4 of its 16 rows on rank 0 of 4, 8 on rank 0 of 2"
    )
    assert [ax.get_title() for ax in fig.axes] == ["4 ranks (saved)", "2 ranks (loaded)"]
