"""Reading notebook 02's sweeps: each batch's runs per seed, the table, the lr/B control.

The large batch runs at its own lr, so it differs from the small batch in two ways at once:
the batch, and lr/B, the ratio that sets how noisy SGD's steps are. The control run keeps
lr/B of the small batch (its lr scaled linearly, with warmup) at the large batch: what it
keeps of the gap and of the sharpness is the batch's share; what it loses is lr/B's.
"""

from __future__ import annotations

from ..core.checks import verdict
from ..sgd.finished import finished_trials


def control_config(sizes) -> dict:
    """The large batch once per seed at the small batch's lr/B, reached by a warmup."""
    return {
        "algorithm": "grid",
        "parameters": {
            "batch_size": {"values": [sizes.large_batch]},
            "seed": {"values": list(sizes.seeds)},
            "lr_rule": {"values": ["linear"]},
        },
        "spec": {"metric": "test_acc", "objective": "maximize"},
    }


def by_seed(result, sizes, batch: int) -> dict:
    """One batch size's trials as metric -> one value per seed, in the order of `sizes.seeds`."""
    finished_trials(result)
    runs = {t.params["seed"]: t.metrics for t in result.trials if t.params["batch_size"] == batch}
    metrics = [runs[seed] for seed in sizes.seeds]
    return {key: [m[key] for m in metrics] for key in metrics[0]}


def by_batch(result, sizes) -> tuple[dict, dict]:
    """The sweep's trials as two dicts, small and large batch: metric -> one value per seed.

    Seeds come in the order of `sizes.seeds`, so the i-th small and large values are a
    pair that started from the same weights.
    """
    return by_seed(result, sizes, sizes.small_batch), by_seed(result, sizes, sizes.large_batch)


def table(small: dict, large: dict, sizes) -> str:
    """One line per run: how long it took to fit and what it ended with."""
    lines = [
        f"{'batch':>5} {'seed':>4} {'epochs':>6} {'updates':>7} {'train loss':>10} "
        f"{'train acc':>9} {'test acc':>8} {'sharpness %':>11} {'top eig':>7}"
    ]
    for batch, side in ((sizes.small_batch, small), (sizes.large_batch, large)):
        for i, seed in enumerate(sizes.seeds):
            lines.append(
                f"{batch:5d} {seed:4d} {side['epochs'][i]:6d} {side['steps'][i]:7d} "
                f"{side['train_loss'][i]:10.4f} {side['train_acc'][i]:9.4f} "
                f"{side['test_acc'][i]:8.4f} {side['sharpness'][i]:11.2f} {side['hessian'][i]:7.2f}"
            )
    return "\n".join(lines)


def _mean(values) -> float:
    return sum(values) / len(values)


def gaps(small: dict, other: dict) -> list[float]:
    """Per seed, the small batch's test accuracy minus the other run's."""
    return [a - b for a, b in zip(small["test_acc"], other["test_acc"], strict=True)]


def control_closes_gap(small: dict, large: dict, control: dict, share: float = 0.5):
    """At the small batch's lr/B the large batch's mean gap is under `share` of its own."""
    own, kept = _mean(gaps(small, large)), _mean(gaps(small, control))
    return verdict(
        own > 0 and kept < share * own,
        f"at the small batch's lr/B the large batch's gap shrinks below {share:.0%} of "
        "the gap at its own lr: most of the gap is lr/B, not the batch",
    )


def control_is_flatter(small: dict, large: dict, control: dict, share: float = 0.5):
    """By both measures, the control's minimum is under `share` as sharp as the large batch's."""
    flatter = all(
        _mean(control[key]) < share * _mean(large[key]) for key in ("sharpness", "hessian")
    )
    return verdict(
        flatter,
        f"its minimum is under {share:.0%} as sharp as the large batch's at its own lr, "
        "by both measures",
    )


def line_has_barrier(ridges: list[float], rise: float = 1.5):
    """Along every straight line the training loss somewhere exceeds `rise` x the higher end.

    A barrier on the straight line only: it does not show that no curved low-loss path
    joins the two solutions (Garipov et al. 2018 and Draxler et al. 2018 found such paths).
    """
    return verdict(
        bool(ridges) and all(r > rise for r in ridges),
        f"on the straight line between the two solutions the training loss rises over {rise:g}x "
        "its value at the ends",
    )
