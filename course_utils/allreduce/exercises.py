"""Checkers for notebook 05: write the ring (and the tree) allreduce yourself.

The learner's function takes this rank's tensor, sums it over all ranks in place with
send/recv (or isend/irecv) and returns it. The checker runs it on 4 ranks with integer
tensors (so the sum is exact) and says which classic mistake it made: a ring that passes
the whole tensor round, wrong chunk indices, a send/recv order that deadlocks, a tree
that forgets to broadcast, or a shortcut through `dist.all_reduce`.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from ..core.checks import NOT_SOLVED, verdict
from ..core.errors import LaunchError, LaunchTimeout
from ..ranks.launch import launch

WORLD_SIZE = 4
LENGTHS = (22, 8)  # uneven chunks (6, 5, 6, 5) and even ones
_P2P = ("send", "isend")
_SHORTCUTS = ("all_reduce", "reduce", "broadcast", "all_gather", "reduce_scatter", "all_to_all")


def check_ring(fn, timeout: float = 5.0) -> bool:
    """✓ when `fn` is a real ring: right sums everywhere, 2(N-1)/N of the tensor per rank."""
    return _check("ring", fn, timeout, max_sent_multiple=2 * (WORLD_SIZE - 1) / WORLD_SIZE)


def check_tree(fn, timeout: float = 5.0) -> bool:
    """✓ when `fn` sums correctly through a tree: no rank sends more than 3 whole tensors."""
    return _check("tree", fn, timeout, max_sent_multiple=3.0)


def _inputs(rank: int, numel: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(97 * rank + numel)
    return torch.randint(-1000, 1000, (numel,), generator=g, dtype=torch.int64)


def _expected(numel: int) -> torch.Tensor:
    return sum(_inputs(r, numel) for r in range(WORLD_SIZE))


def _on_rank(fn) -> list[dict]:
    """Run the learner's function with its sends counted and the shortcuts watched."""
    sent, shortcuts = [0], []
    originals = {}

    def counting(name):
        original = getattr(dist, name)

        def wrapper(tensor, *args, **kwargs):
            sent[0] += tensor.numel() * tensor.element_size()
            return original(tensor, *args, **kwargs)

        return wrapper

    def watching(name):
        original = getattr(dist, name)

        def wrapper(*args, **kwargs):
            shortcuts.append(name)
            return original(*args, **kwargs)

        return wrapper

    for name in _P2P + _SHORTCUTS:
        originals[name] = getattr(dist, name)
        setattr(dist, name, counting(name) if name in _P2P else watching(name))
    try:
        runs = []
        for numel in LENGTHS:
            sent[0] = 0
            out = fn(_inputs(dist.get_rank(), numel))
            if out is not None and not isinstance(out, torch.Tensor):
                out = f"a {type(out).__name__}"
            runs.append({"numel": numel, "out": out, "sent": sent[0], "shortcuts": shortcuts[:]})
        return runs
    finally:
        for name, original in originals.items():
            setattr(dist, name, original)


def _check(kind: str, fn, timeout: float, max_sent_multiple: float) -> bool:
    if fn is None or not callable(fn):
        return verdict(False, NOT_SOLVED)
    try:
        per_rank = launch(_on_rank, WORLD_SIZE, args=(fn,), timeout=timeout, backend="gloo")
    except LaunchTimeout:
        return verdict(False, _DEADLOCK.format(kind=kind))
    except LaunchError as exc:
        if exc.exc_type == "NotImplementedError":
            return verdict(False, NOT_SOLVED)
        if exc.exc_type is None and kind == "ring":  # gloo aborts on a size mismatch
            return verdict(False, f"your ring crashed on rank {exc.rank}. {_CHUNKS}")
        how = exc.exc_type or "it died"
        return verdict(False, f"your {kind} failed on rank {exc.rank}: {how} (see above)")
    problem = _first_problem(kind, per_rank, max_sent_multiple)
    if problem:
        return verdict(False, problem)
    return verdict(True, _PASSED[kind])


def _first_problem(kind: str, per_rank: list, max_sent_multiple: float) -> str | None:
    for case in range(len(LENGTHS)):
        runs = [ranks[case] for ranks in per_rank]
        numel = runs[0]["numel"]
        if any(r["out"] is None for r in runs):
            return NOT_SOLVED
        if any(isinstance(r["out"], str) for r in runs):
            return f"your {kind} must return the summed tensor, not {runs[0]['out']}"
        used = sorted({name for r in runs for name in r["shortcuts"]})
        if used:
            return (
                f"your {kind} calls dist.{used[0]}: build it from dist.send/recv "
                "(or isend/irecv) only, that is the point of the exercise"
            )
        expected = _expected(numel)
        right = [r["out"].shape == expected.shape and torch.equal(r["out"], expected) for r in runs]
        if not any(right):
            return _wrong_everywhere(kind, runs, expected)
        if not all(right):
            good = [i for i, ok in enumerate(right) if ok]
            return f"only rank {good[0]} holds the right sum (tensor of {numel}): the others " + (
                "never got the finished chunks back: add the all-gather phase"
                if kind == "ring"
                else "never got it: broadcast the total back down the tree"
            )
        limit = max_sent_multiple * numel * 8 + 8 * WORLD_SIZE
        worst = max(r["sent"] for r in runs)
        if worst > limit:
            if kind == "ring":
                return (
                    "the sums are right, but a rank sent more than 2(N-1)/N of the tensor: "
                    "a ring passes one chunk (1/N of the tensor) per step, not the whole tensor"
                )
            return (
                "the sums are right, but a rank sent more than 3 whole tensors: in a tree "
                "each rank sends only to its parent (up) and to its children (down)"
            )
    return None


def _wrong_everywhere(kind: str, runs: list, expected: torch.Tensor) -> str:
    out = runs[0]["out"]
    if out.shape != expected.shape:
        return f"your {kind} returned a tensor of shape {tuple(out.shape)}, not the input's shape"
    if kind != "ring":
        return (
            "no rank holds the right sum: check that each parent adds what its children "
            "send, exactly once"
        )
    return f"no rank holds the right sum on every element. {_CHUNKS}"


_CHUNKS = (
    "Check the chunk indices: in reduce-scatter step s, rank r sends chunk (r - s) % N and "
    "adds the chunk (r - s - 1) % N it receives; in all-gather step s it sends chunk "
    "(r + 1 - s) % N and stores the chunk (r - s) % N it receives (a receive buffer of the "
    "wrong size crashes a rank)"
)
_DEADLOCK = (
    "your {kind} deadlocked: every rank was waiting to communicate and none could go on "
    "(stopped by the timeout). If every rank first waits in recv (or in a blocking send), "
    "no message ever moves: post both with dist.isend/dist.irecv and then wait on both, or "
    "let even ranks send first and odd ranks receive first"
)
_PASSED = {
    "ring": "your ring sums correctly on 4 ranks and sends only 2(N-1)/N of the tensor per rank",
    "tree": "your tree sums correctly on 4 ranks, every rank ends with the total",
}
