"""Checkers for notebook 09: the resume logic, and finding the slow rank in a timing table.

Each checker tries the learner's function, prints one verdict line naming the mistake it
found, and returns whether it passed; it never raises at the learner.
"""

from __future__ import annotations

import copy
import random

import torch
import torch.distributed as dist

from ..core.backends import GLOO
from ..core.checks import NOT_SOLVED, attempt, verdict
from ..core.errors import LaunchError
from ..core.own_answers import answer, first_problem_verdict
from ..core.training import Recipe, train
from ..ranks.launch import launch
from .resume import RunConfig, build, replica

CHECK_RUN = RunConfig(steps=24, every=None, hidden=32, train_samples=512)
SAVES_AT = (11, 19)  # mid-pass (8 updates per pass): the epoch and the position both matter


def answer_phrases() -> dict[str, list]:
    """What would give an answer away as text (`course.revealed`): the straggler's sign."""
    return {"slowest_rank": ["waits least", "wait least", "waits the least", "shortest wait"]}


def _snapshot(model, optimizer, batches) -> dict:
    return {
        "model": copy.deepcopy(model.state_dict()),
        "optimizer": copy.deepcopy(optimizer.state_dict()),
        "sampler": batches.state_dict(),
        "rng": torch.get_rng_state(),
    }


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return torch.equal(a, b) if torch.is_tensor(a) else a == b


def _resume_trial(resume, cfg: RunConfig, save_at: int) -> dict:
    """One rank: the reference run with a snapshot at `save_at`; then a fresh start resumed
    by the learner's function; which parts came back, and whether the ends agree."""
    model, optimizer, batches, loader = build(cfg)
    saved = {}

    def keep(step, loss):
        if step == save_at:
            saved.update(_snapshot(model, optimizer, batches))

    train(replica(model), loader, Recipe(max_steps=cfg.steps, optimizer=optimizer), after_step=keep)
    expected = torch.nn.utils.parameters_to_vector(model.parameters()).detach().clone()
    model, optimizer, batches, loader = build(cfg)
    torch.manual_seed(12345)  # a fresh process's RNG is not the saved one
    out = attempt(resume, model, optimizer, batches, {**copy.deepcopy(saved), "step": save_at})
    if isinstance(out, str) and out == NOT_SOLVED:
        return {"solved": False}
    now = _snapshot(model, optimizer, batches)
    restored = {part: _same(saved[part], now[part]) for part in saved}
    train(replica(model), loader, Recipe(max_steps=cfg.steps - save_at, optimizer=optimizer))
    final = torch.nn.utils.parameters_to_vector(model.parameters()).detach()
    return {"solved": True, "restored": restored, "equal": torch.equal(final, expected),
            "step": out, "rank": dist.get_rank()}  # fmt: skip


MISTAKES = {
    "optimizer": "the optimizer's state is not restored: momentum starts again from zero",
    "sampler": "the sampler's epoch and position are not restored: the resumed run sees "
    "other batches",
    "rng": "the RNG state is not restored: the resumed run draws other noise",
    "model": "the model's weights are not restored",
}


def check_resume(resume, world_size: int = 2, timeout: float = 60.0) -> bool:
    """`resume(model, optimizer, batches, saved)` puts every saved part back, on every rank,
    and returns the step to go on from (`saved["step"]`); tried on checkpoints saved at two
    steps, so that a step typed in fails."""
    for save_at in SAVES_AT:
        try:
            ranks = launch(_resume_trial, world_size, args=(resume, CHECK_RUN, save_at),
                           timeout=timeout, backend=GLOO)  # fmt: skip
        except LaunchError as exc:
            return verdict(False, f"resume failed on a rank: {str(exc).splitlines()[0]}")
        problem = _resume_problem(ranks, save_at)
        if problem:
            return verdict(False, problem)
    return verdict(True, "the resumed run ends bit for bit where the uninterrupted one does")


def _resume_problem(ranks: list[dict], save_at: int) -> str | None:
    if not all(r["solved"] for r in ranks):
        return NOT_SOLVED
    complete = [all(r["restored"].values()) for r in ranks]
    if any(complete) and not all(complete):
        left = [r["rank"] for r, ok in zip(ranks, complete, strict=True) if not ok]
        return (
            f"rank {left[0]} did not restore: every rank must resume, not only rank 0 "
            "(each holds its own sampler position and RNG)"
        )
    for part, mistake in MISTAKES.items():
        if not all(r["restored"][part] for r in ranks):
            return mistake
    wrong = next((r["step"] for r in ranks if r["step"] != save_at), None)
    if wrong is not None:
        return (
            f"return the step the checkpoint was saved at, saved['step'] (it was saved at "
            f"{save_at}, you returned {wrong!r})"
        )
    if not all(r["equal"] for r in ranks):
        return "everything was restored, yet the resumed run ends elsewhere"
    return None


def timing_tables(seed: int = 3, cases: int = 6) -> list[tuple[dict, int]]:
    """Tables like the notebook's, in seconds, with a random slow rank in each."""
    rng = random.Random(seed)
    out = []
    for _ in range(cases):
        n = rng.choice((2, 4, 8))
        slow = rng.randrange(n)
        step = rng.uniform(0.05, 0.2)
        table = {}
        for r in range(n):
            wait = rng.uniform(0.0, 0.004) if r == slow else step * rng.uniform(0.5, 0.9)
            table[r] = {"step": step * rng.uniform(0.98, 1.02), "wait": wait}
        out.append((table, slow))
    return out


def check_slowest_rank(slowest_rank) -> bool:
    """`slowest_rank(table)`: which rank slows the job, from each rank's step and wait times."""

    def problem(table: dict, slow: int) -> str | None:
        value = answer(slowest_rank, copy.deepcopy(table))
        if value == max(table, key=lambda r: table[r]["wait"]):
            return "that is the rank that waits longest: the fastest one, waiting for the slow one"
        if value != slow:
            return (
                "every rank's step lasts about as long, so the step time cannot tell; "
                "look at what each rank does besides waiting"
            )
        return None

    solved = "slowest_rank finds the straggler in every table tried"
    return first_problem_verdict(slowest_rank, "slowest_rank", problem, timing_tables(), solved)
