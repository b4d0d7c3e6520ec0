"""The arms of notebook 02: which batch, at whose lr/B, with or without a warmup.

The small and the large batch at their own lrs differ in three things at once: the batch,
the lr, and their ratio lr/B (how much noise each of SGD's steps carries). The other arms
pull them apart. The large batch at the small batch's lr/B (its lr scaled linearly, with a
warmup) and the small batch at the large batch's lr/B swap lr/B between the batches; the
large batch at its own lr with the same warmup shows what the warmup alone does. Every arm
runs once per seed, from the same initial weights as the other arms of that seed.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..sgd.sweep_config import grid_config


@dataclass(frozen=True)
class Arm:
    batch: str  # "small" or "large": the profile's small_batch or large_batch
    lr_over_b: str  # "small" or "large": whose lr/B it runs at (lr scaled with the batch)
    warmup: bool = False  # reach the lr by `warmup_updates` of linear warmup


ARMS = {
    "small": Arm("small", "small"),
    "large": Arm("large", "large"),
    "large, warmup": Arm("large", "large", warmup=True),
    "large at small lr/B": Arm("large", "small", warmup=True),
    "small at large lr/B": Arm("small", "large"),
}
SLOW = "small at large lr/B"  # ~5x the updates of any other arm to fit: run on fewer seeds


def arm(name: str) -> Arm:
    try:
        return ARMS[name]
    except KeyError:
        raise ValueError(
            f"arm must be one of {', '.join(map(repr, ARMS))}; got {name!r}."
        ) from None


def batch_of(sizes, name: str) -> int:
    return sizes.small_batch if arm(name).batch == "small" else sizes.large_batch


def lr_of(sizes, name: str) -> float:
    """The lr of an arm: the lr/B of the batch it borrows from, times its own batch."""
    if arm(name).lr_over_b == "small":
        return sizes.small_lr * batch_of(sizes, name) / sizes.small_batch
    return sizes.large_lr * batch_of(sizes, name) / sizes.large_batch


def warmup_of(sizes, name: str):
    """The lr multiplier per update, or None: from 1/k of the lr up to all of it, k being
    how many times the small batch the arm's batch is (Goyal et al.'s gradual warmup)."""
    if not arm(name).warmup:
        return None
    k, steps = batch_of(sizes, name) / sizes.small_batch, sizes.warmup_updates

    def warmup(t: int) -> float:
        return 1.0 if t >= steps else 1 / k + (1 - 1 / k) * t / steps

    return warmup


def label(sizes, name: str) -> str:
    """What an arm is, in numbers: "batch 1024, lr 0.32, warmup"."""
    warm = ", warmup" if arm(name).warmup else ""
    return f"batch {batch_of(sizes, name)}, lr {lr_of(sizes, name):.3g}{warm}"


def describe(sizes) -> str:
    """One line per arm: its batch, lr and warmup, its lr/B, and the seeds it runs on."""
    lines = []
    for name in ARMS:
        seeds = sizes.slow_arm_seeds if name == SLOW else sizes.seeds
        ratio = lr_of(sizes, name) / batch_of(sizes, name)
        lines.append(f"{name:<20} {label(sizes, name):<28} lr/B {ratio:.2e}  seeds {list(seeds)}")
    return "\n".join(lines)


def edge_of_stability(lr: float, momentum: float) -> float:
    """The curvature above which gradient descent with heavy-ball momentum at this lr is
    unstable on a quadratic: (2 + 2 momentum) / lr (Cohen et al. 2021; 2 / lr without momentum).
    Full-batch gradient descent drives the top Hessian eigenvalue up to it and hovers there."""
    return (2 + 2 * momentum) / lr


def sweep_config(sizes, names=tuple(ARMS), seeds=None) -> dict:
    """These arms once per seed (default: every arm, `sizes.seeds`), side by side."""
    for name in names:
        arm(name)
    return grid_config({"arm": names, "seed": sizes.seeds if seeds is None else seeds})


def sweep_configs(sizes) -> list[dict]:
    """The notebook's one search: every arm on every seed, but the slow arm only on
    `sizes.slow_arm_seeds` and listed first, so that it starts at once and the other arms'
    trials share the other lane meanwhile (two searches, the slow one first, left a lane
    idle for half a minute). Each trial is one `run` (`run_name`)."""
    rest = [name for name in ARMS if name != SLOW]
    runs = [run_name(SLOW, seed) for seed in sizes.slow_arm_seeds]
    runs += [run_name(name, seed) for name in rest for seed in sizes.seeds]
    return [grid_config({"run": runs})]


def run_name(name: str, seed: int) -> str:
    """One trial of one arm, as the search lists it: 'large at small lr/B, seed 2'."""
    arm(name)
    return f"{name}, seed {seed}"


def arm_and_seed(params: dict) -> tuple[str, int]:
    """A trial's arm and seed, from its `run` or from `arm` and `seed` (`sweep_config`)."""
    if "run" in params:
        name, _, seed = params["run"].rpartition(", seed ")
        return name, int(seed)
    return params["arm"], params["seed"]
