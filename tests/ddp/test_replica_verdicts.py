"""04's verdicts on the replicas, fed as the notebook feeds them: a short equivalence run
and an overlap timeline pass, and one that sums without dividing, never averages, or
reduces in one bucket after the backward prints ✗."""

from __future__ import annotations

import torch.distributed as dist

from course_utils.ddp import cost, equivalence
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


def test_one_bucket_reduced_after_the_backward_does_not_overlap(capsys):
    small = dict(layers=4, width=128, batch=32, steps=2)
    assert verdicts.first_bucket_overlaps_backward(
        cost.overlap_timeline(bucket_cap_mb=0.05, **small)
    )
    one_bucket = cost.overlap_timeline(bucket_cap_mb=1000.0, **small)
    assert not verdicts.first_bucket_overlaps_backward(one_bucket)
    assert "✗ the first bucket's all-reduce starts before" in capsys.readouterr().out
