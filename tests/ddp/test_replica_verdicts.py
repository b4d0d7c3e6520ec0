"""04's verdicts on the replicas, fed as the notebook feeds them: a short equivalence run,
a 2-rank comparison, a short lr-scaling sweep and an overlap timeline pass, and one that
sums without dividing, never averages, never scales its lr, stops before the rule fails,
or reduces in one bucket after the backward prints ✗."""

from __future__ import annotations

import torch.distributed as dist

from course_utils.core import profiles
from course_utils.ddp import cost, equivalence, experiments
from course_utils.ddp import replica_verdicts as verdicts

SHORT = equivalence.Setup(steps=5)


def _summed_not_averaged(model):
    for p in model.parameters():
        dist.all_reduce(p.grad)


def _never_averaged(model):
    return None


def test_replicas_that_average_equal_one_process(capsys):
    assert verdicts.equals_one_process(equivalence.equivalence(2, "by_hand", SHORT))
    assert verdicts.equals_one_process(equivalence.equivalence(2, "ddp", SHORT))
    out = capsys.readouterr().out
    assert (
        "✓ averaging gradients by hand equals one process with the N-times batch (to 1e-5)" in out
    )
    assert "✓ DDP on N ranks equals one process with the N-times batch after 5 updates" in out


def test_replicas_that_sum_or_never_average_do_not(capsys):
    for wrong in (_summed_not_averaged, _never_averaged):
        result = equivalence.equivalence(2, "by_hand", SHORT, average=wrong)
        assert not verdicts.equals_one_process(result)
        assert result.max_abs_diff > 100 * verdicts.TOLERANCE
    assert capsys.readouterr().out.count("✗ averaging gradients by hand") == 2


def _summing_wrap(model):
    """DDP whose all-reduce sums the buckets and never divides by N: the learner's slip."""

    def summed(state, bucket):
        reduced = dist.all_reduce(bucket.buffer(), async_op=True).get_future()
        return reduced.then(lambda fut: fut.value()[0])

    wrapped = equivalence.wrap(model)
    wrapped.register_comm_hook(None, summed)
    return wrapped


def test_ddp_trains_like_the_effective_batch_and_a_summing_ddp_like_the_per_rank_one(
    monkeypatch, capsys
):
    claim = "DDP's curve is far closer to one process at the effective batch"
    assert verdicts.closer_to_the_effective_batch(experiments.compare_with_single(2, SHORT, 2))
    monkeypatch.setattr(experiments, "wrap", _summing_wrap)  # the forked ranks inherit it
    summing = experiments.compare_with_single(2, SHORT, 2)
    assert not verdicts.closer_to_the_effective_batch(summing)
    assert summing.gap_to_per_rank < summing.gap_to_effective  # it follows batch b instead
    out = capsys.readouterr().out
    assert f"✓ {claim}" in out and f"✗ {claim}" in out


def test_one_rank_has_no_second_batch_to_compare_and_is_not_judged(capsys):
    one_rank = experiments.compare_with_single(1, SHORT, 1)
    assert verdicts.closer_to_the_effective_batch(one_rank) is None
    out = capsys.readouterr().out
    assert "with 1 rank the effective batch is the per-rank batch" in out
    assert "✓" not in out and "✗" not in out


CPU = profiles.PROFILES["cpu"]
PROFILE_SETUP = equivalence.Setup(
    dataset=CPU.dataset, model=CPU.model, hidden=CPU.ddp.hidden, lr=CPU.ddp.lr
)
SCALING = dict(world_size=2, setup=PROFILE_SETUP, base_lr=CPU.ddp.scaling_base_lr, epochs=2)


def test_the_scaled_lr_regains_the_next_batch_and_stops_helping_at_the_largest(capsys):
    gains = verdicts.scaling_gains(experiments.lr_scaling(per_rank_batches=(4, 16, 256), **SCALING))
    assert verdicts.scaling_regains_most(gains) and verdicts.rule_stops_helping(gains)
    assert capsys.readouterr().out.count("✓") == 2


def test_an_lr_never_scaled_regains_nothing(monkeypatch, capsys):
    monkeypatch.setattr(experiments, "scaled_lr", lambda base_lr, base_batch, batch: base_lr)
    gains = verdicts.scaling_gains(experiments.lr_scaling(per_rank_batches=(4, 16), **SCALING))
    assert gains.regained == 0 and not verdicts.scaling_regains_most(gains)
    assert "✗ at 4x the base batch, scaling the lr regains most" in capsys.readouterr().out


def test_a_sweep_that_stops_within_the_rules_reach_does_not_see_it_stop(capsys):
    gains = verdicts.scaling_gains(experiments.lr_scaling(per_rank_batches=(4, 8), **SCALING))
    assert not verdicts.rule_stops_helping(gains)
    assert "✗ at the largest effective batch even the scaled lr" in capsys.readouterr().out


def test_one_bucket_reduced_after_the_backward_does_not_overlap(capsys):
    small = dict(layers=4, width=128, batch=32, steps=2)
    assert verdicts.first_bucket_overlaps_backward(
        cost.overlap_timeline(bucket_cap_mb=0.05, **small)
    )
    one_bucket = cost.overlap_timeline(bucket_cap_mb=1000.0, **small)
    assert not verdicts.first_bucket_overlaps_backward(one_bucket)
    assert "✗ the first bucket's all-reduce starts before" in capsys.readouterr().out
