"""One process vs naive DDP vs each fix, on the same samples at the same effective batch.

Over the profile's link (`--link`; the cpu profile's is emulated, so the wire sets the
communication time). Target: every variant at one effective batch, and naive DDP slower
than one process, as in the report (`core.published`).
"""

from __future__ import annotations

from ..core.published import naive_ddp_over_one_process
from ..network import wire

NAME = "ddp-overhead"
HELP = "seconds per 1000 samples of one process, naive DDP and each fix, same effective batch"


def add_arguments(parser) -> None:
    wire.add_argument(parser)
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--per-rank-batch", type=int, default=16)
    parser.add_argument("--samples-per-rank", type=int, default=512)
    parser.add_argument("--accumulate", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)


def run(args) -> dict:
    from .cost import measure, measure_single, standard_variants
    from .verdicts import saving

    link = wire.resolve(args.link, args.world_size)
    n, b = args.world_size, args.per_rank_batch
    single = measure_single(n * b, n * args.samples_per_rank, repeats=args.repeats)
    variants = standard_variants(b, args.accumulate)
    timed = measure(variants, n, args.samples_per_rank, repeats=args.repeats, link=link)
    naive = timed[0]
    rows = {"one process": single, **{t.name: t for t in timed}}
    same_batch = len({t.effective_batch for t in rows.values()}) == 1
    slower = naive.seconds_per_1000_samples / single.seconds_per_1000_samples
    return {
        "benchmark": NAME,
        "link": link.spec,
        "clock": link.clock,
        "world_size": n,
        "seconds_per_1000_samples": {
            k: round(t.seconds_per_1000_samples, 4) for k, t in rows.items()
        },
        "effective_batch_of": {k: t.effective_batch for k, t in rows.items()},
        "saving_per_1000_samples_vs_naive": {t.name: round(saving(naive, t), 4) for t in timed[1:]},
        "naive_over_single": round(slower, 2),
        "report_naive_over_single": round(naive_ddp_over_one_process(), 2),
        "target": "every variant at one effective batch; naive DDP slower than one process",
        "met": same_batch and slower > 1,
    }
