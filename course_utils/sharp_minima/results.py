"""Reading notebook 02's sweeps: each arm's runs per seed, the table, the gaps between arms.

Every arm is a dict of metric -> one value per seed, with the seeds under "seed", so two
arms are compared seed by seed (runs of one seed start from the same weights) even when
one of them ran on fewer seeds.
"""

from __future__ import annotations

from .arms import ARMS, arm_and_seed, edge_of_stability


def by_arm(results, sizes) -> dict:
    """The trials of one or more sweeps as arm name -> metric -> one value per seed, arms in
    the order of `ARMS`, seeds in the order of `sizes.seeds`."""
    trials = [t for result in results for t in result.finished()]
    runs = {}
    for name in ARMS:
        mine = {
            seed: t.metrics for t in trials for arm, seed in [arm_and_seed(t.params)] if arm == name
        }
        seeds = [seed for seed in sizes.seeds if seed in mine]
        if seeds:
            metrics = [mine[seed] for seed in seeds]
            runs[name] = {"seed": seeds, **{k: [m[k] for m in metrics] for k in metrics[0]}}
    return runs


def paired(a: dict, b: dict, key: str) -> list[tuple]:
    """(a's value, b's value) of `key` at every seed both arms ran, in a's order of seeds."""
    at_b = dict(zip(b["seed"], b[key], strict=True))
    return [(v, at_b[seed]) for seed, v in zip(a["seed"], a[key], strict=True) if seed in at_b]


def gaps(reference: dict, other: dict) -> list[float]:
    """Per seed, the reference arm's test accuracy minus the other arm's."""
    return [a - b for a, b in paired(reference, other, "test_acc")]


def points(values, scale: float = 100.0) -> str:
    """Per-seed values and their range, e.g. "[3.4, 3.7, 2.6] (2.6 to 3.7)"."""
    scaled = [round(scale * v, 2) for v in values]
    return f"{scaled} ({min(scaled):g} to {max(scaled):g})"


def table(runs: dict, momentum: float) -> str:
    """One line per run: how long it took to fit, what it ended with, and its top eigenvalue
    beside the edge of stability of its lr, (2 + 2 momentum) / lr."""
    lines = [
        f"{'arm':<20} {'batch':>5} {'lr':>7} {'seed':>4} {'epochs':>6} {'updates':>7} "
        f"{'train loss':>10} {'train acc':>9} {'test acc':>8} {'sharp %':>7} {'top eig':>7} "
        f"{'eig x lr':>8} {'edge':>6}"
    ]
    for name, side in runs.items():
        for i, seed in enumerate(side["seed"]):
            lr = side["lr"][i]
            lines.append(
                f"{name:<20} {side['batch_size'][i]:5d} {lr:7.4f} {seed:4d} "
                f"{side['epochs'][i]:6d} {side['steps'][i]:7d} {side['train_loss'][i]:10.4f} "
                f"{side['train_acc'][i]:9.4f} {side['test_acc'][i]:8.4f} "
                f"{side['sharpness'][i]:7.2f} {side['hessian'][i]:7.2f} "
                f"{side['hessian'][i] * lr:8.3f} {edge_of_stability(lr, momentum):6.1f}"
            )
    return "\n".join(lines)
