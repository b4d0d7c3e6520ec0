"""The notebook's claims about traffic and learning rates, as verdicts that can fail.

Each compares measured numbers with a stated threshold and prints one line; the tests
feed each one a case where the effect is absent.
"""

from __future__ import annotations

from ..core.checks import Verdict, verdict

__all__ = [
    "async_breaks_at_sync_rate",
    "async_needs_smaller_lr",
    "server_grows_ring_levels_off",
]


def server_grows_ring_levels_off(
    workers, server_bytes, ring_bytes, tolerance: float = 0.1, share: float = 0.8
) -> Verdict:
    """The server's bytes per update, relative to the fewest workers', track the workers'
    ratio within `tolerance` at every count measured; from the fewest ranks to the most, the
    busiest ring rank's bytes grow by less than `share` x the growth of the number of ranks."""
    grows = all(
        abs((b / server_bytes[0]) / (n / workers[0]) - 1) <= tolerance
        for n, b in zip(workers, server_bytes, strict=True)
    )
    levels_off = ring_bytes[-1] / ring_bytes[0] < share * workers[-1] / workers[0]
    return verdict(
        grows and levels_off,
        f"the server's bytes per update grow in proportion to its workers (within "
        f"{tolerance:.0%}), while the busiest allreduce rank's grow less than {share:g} x as "
        "fast: they level off below a bound",
    )


def async_needs_smaller_lr(chosen: dict[str, float]) -> Verdict:
    """The rate chosen on validation for asynchronous SGD is below synchronous SGD's."""
    return verdict(
        chosen["asynchronous"] < chosen["synchronous"],
        "on validation loss, asynchronous SGD's best learning rate is smaller than "
        "synchronous SGD's",
    )


def async_breaks_at_sync_rate(
    lrs, val_loss: dict[str, list[float]], chosen: dict, gap: float = 0.2
) -> Verdict:
    """At synchronous SGD's chosen rate, asynchronous SGD's mean validation loss is more
    than `gap` above both synchronous SGD's and a lone worker's."""
    at = list(lrs).index(chosen["synchronous"])
    loss = {method: values[at] for method, values in val_loss.items()}
    ok = loss["asynchronous"] > max(loss["synchronous"], loss["one worker alone"]) + gap
    return verdict(
        ok,
        f"at synchronous SGD's chosen rate, asynchronous SGD's validation loss is more than "
        f"{gap:g} above synchronous SGD's and a lone worker's",
    )
