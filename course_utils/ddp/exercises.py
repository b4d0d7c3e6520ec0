"""Checkers for notebook 04: gradient averaging by hand, and counting updates per epoch.

The averaging is trained on 2 ranks and then on 3, so that a division by a number typed
in (`/ 2`) fails. The count is checked against the lengths DistributedSampler and the
loader's BatchSampler report for datasets that do and do not divide by the number of
ranks, and names the sampler's classic mistakes: padding although `drop_last=True`, and,
for a function that takes `drop_last`, forgetting the padding or dropping samples when
`drop_last=False`.
"""

from __future__ import annotations

import inspect
import math

import torch
import torch.distributed as dist
from torch.utils.data import BatchSampler, DistributedSampler

from ..core.checks import NOT_SOLVED, Verdict, attempt, verdict
from ..core.errors import LaunchError
from ..core.own_answers import (
    Refused,
    Refusing,
    attempt_refusing,
    from_launch,
    message,
    own_answer,
    own_answer_name,
)
from ..ranks.launch import launch
from .equivalence import Setup, equivalence

AVERAGE_CLAIM = "your average_gradients makes N ranks equal one process with the N-times batch"
AVERAGE_WORLD_SIZES = (2, 3)


def check_average_gradients(average, steps: int = 6) -> Verdict:
    """Train with the learner's averaging on each of `AVERAGE_WORLD_SIZES` ranks in turn;
    compare each run with its serial twin."""
    if own_answer_name(average):
        return verdict(False, message(own_answer_name(average)))
    setup, average = Setup(per_rank_batch=8, steps=steps, hidden=16, lr=0.1), Refusing(average)
    passed = []
    for n in AVERAGE_WORLD_SIZES:
        try:
            if not passed:
                tried = launch(_try_average, n, args=(average,), timeout=60, backend="gloo")
                if NOT_SOLVED in tried:
                    return verdict(False, NOT_SOLVED)
            result = equivalence(n, "by_hand", setup, average=average, timeout=60)
        except LaunchError as exc:
            if from_launch(exc):
                return verdict(False, from_launch(exc))
            failed = f"a rank failed on {n} ranks ({exc.exc_type}), see above"
            return verdict(False, f"{AVERAGE_CLAIM}: {failed}")
        if result.max_abs_diff > 1e-5:
            print(f"largest weight difference from the one-process run: {result.max_abs_diff:.2e}")
            return verdict(False, f"{AVERAGE_CLAIM}: {_average_hint(result, passed)}")
        passed.append(n)
    return verdict(True, AVERAGE_CLAIM)


def _average_hint(result, passed: list[int]) -> str:
    n = result.world_size
    if not result.ranks_identical:
        return f"the replicas drifted apart on {n} ranks: every rank must all_reduce every gradient"
    if passed:
        return (
            f"right on {passed[-1]} ranks but not on {n}: divide by dist.get_world_size(), "
            "not by a number typed in"
        )
    return "the replicas agree but took too large steps: divide the summed gradients by N"


def _try_average(average) -> str:
    """Inside a rank: call the learner's averaging once on a small model, through `attempt`.

    The averaging works in place and rightly returns None, so only the stub's
    NotImplementedError comes back as NOT_SOLVED.
    """
    dist.barrier()  # every rank connected before a stub returns and its rank exits
    model = torch.nn.Linear(3, 1)
    for p in model.parameters():
        p.grad = torch.full_like(p, float(dist.get_rank()))
    return attempt(_averaged, average, model)


def _averaged(average, model) -> str:
    average(model)
    return "averaged"


STEPS_CLAIM = "updates_per_epoch counts the updates of one epoch of DDP"
# (samples, world_size, per_rank_batch): 999 and 1001 do not divide by 4, and padding
# changes the count of the one with drop_last=True, forgetting it that of the other
_CASES = [(8000, 4, 8), (8000, 2, 32), (6400, 4, 128), (50000, 8, 64), (1000, 3, 7),
          (999, 4, 10), (1001, 4, 10)]  # fmt: skip


@own_answer("updates_per_epoch")
def sampler_updates(samples: int, world_size: int, per_rank_batch: int, drop_last=True) -> int:
    """Updates of one epoch as torch counts them: the length of every rank's BatchSampler
    over its DistributedSampler, `drop_last` given to both (as `core.data.shard_loader`);
    refused to a learner's function that calls it."""
    counts = {
        len(BatchSampler(DistributedSampler(range(samples), world_size, rank, shuffle=False,
                                            drop_last=drop_last), per_rank_batch, drop_last))
        for rank in range(world_size)
    }  # fmt: skip
    assert len(counts) == 1, "DistributedSampler gives every rank as many samples"
    return counts.pop()


def answer_values() -> dict[str, list]:
    """The count's cases and answers with drop_last=True, as notebook 04 asks it
    (`course.revealed`: none may appear above the exercise)."""
    return {"updates_per_epoch": [(case, sampler_updates(*case)) for case in _CASES]}


def _takes_drop_last(fn) -> bool:
    try:
        return "drop_last" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def check_updates_per_epoch(fn) -> Verdict:
    """`fn(samples, world_size, per_rank_batch)` against DistributedSampler's count with
    `drop_last=True`; a function that takes `drop_last=` is also tried with False."""
    if own_answer_name(fn):
        return verdict(False, message(own_answer_name(fn)))
    settings = (True, False) if _takes_drop_last(fn) else (True,)
    tried = [(case, d) for d in settings for case in _CASES]
    answers = [attempt_refusing(_counted, fn, case, d, len(settings) > 1) for case, d in tried]
    refused = next((a for a in answers if isinstance(a, Refused)), None)
    if refused is not None:
        return verdict(False, refused)
    if any(a is NOT_SOLVED for a in answers):
        return verdict(False, NOT_SOLVED)
    wrong = [(c, d, a) for (c, d), a in zip(tried, answers, strict=True)
             if a != sampler_updates(*c, drop_last=d)]  # fmt: skip
    if not wrong:
        return verdict(True, STEPS_CLAIM)
    if len(set(answers)) == 1:
        hint = f"{answers[0]} for every case tried: count from the arguments, not a number typed in"
        return verdict(False, f"{STEPS_CLAIM}: {hint}")
    return verdict(False, f"{STEPS_CLAIM}: {_steps_hint(*wrong[0])}")


def _counted(fn, case, drop_last: bool, pass_drop_last: bool):
    return fn(*case, drop_last=drop_last) if pass_drop_last else fn(*case)


def _steps_hint(case, drop_last: bool, answer) -> str:
    samples, n, b = case
    low, high = samples // n, math.ceil(samples / n)
    where = f"{samples} samples on {n} ranks, batch {b} per rank, drop_last={drop_last}"
    if answer == samples // b:
        return "each rank sees only 1/N of the samples, so there are N times fewer updates"
    if drop_last and answer == high // b:
        return (
            f"padded although drop_last=True ({where}): DistributedSampler(drop_last=True) "
            f"cuts the dataset to a multiple of N, so every rank gets floor({samples}/{n}) = "
            f"{low} samples; rounding up is the padding of drop_last=False"
        )
    if drop_last and answer in (samples // (n * b) + 1, math.ceil(samples / (n * b))):
        return "with drop_last, a last incomplete batch is not an update"
    if not drop_last and answer == math.ceil(low / b):
        return (
            f"forgot the padding ({where}): without it the ranks would hold {low} or {high} "
            f"samples and take unequal numbers of updates, and a rank with one more batch "
            f"would wait at its all-reduce for ever; DistributedSampler repeats samples so "
            f"that every rank gets ceil({samples}/{n}) = {high}"
        )
    if not drop_last and answer in (low // b, high // b):
        return (
            f"dropped samples although drop_last=False ({where}): nothing is cut, the "
            f"sampler pads every rank to ceil({samples}/{n}) = {high} samples and the last, "
            f"smaller batch is an update too"
        )
    return f"for {samples} samples, {n} ranks, batch {b} per rank the answer is not {answer}"
