"""One process vs naive DDP vs the best fix, on the same samples at the same effective batch."""

from __future__ import annotations

NAME = "ddp-overhead"
HELP = "step time of one process, of naive DDP and of the best fix, same effective batch"


def add_arguments(parser) -> None:
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--per-rank-batch", type=int, default=4)
    parser.add_argument("--samples-per-rank", type=int, default=2048)
    parser.add_argument("--accumulate", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)


def run(args) -> dict:
    from .cost import measure, measure_single, standard_variants

    n, b = args.world_size, args.per_rank_batch
    single = measure_single(n * b, n * args.samples_per_rank, repeats=args.repeats)
    variants = standard_variants(b, args.accumulate)
    timed = measure(variants, n, args.samples_per_rank, repeats=args.repeats)
    naive, fixes = timed[0], timed[1:]
    best = min(fixes, key=lambda t: t.seconds_per_1000_samples)
    per_step = lambda t: t.seconds / (t.samples / t.per_rank_batch)  # noqa: E731
    return {
        "benchmark": NAME,
        "world_size": n,
        "effective_batch": n * b,
        "single_step_seconds": per_step(single),
        "naive_ddp_step_seconds": per_step(naive),
        "best_fix": best.name,
        "best_fix_step_seconds": per_step(best),
        "seconds_per_1000_samples": {
            "one process": single.seconds_per_1000_samples,
            **{t.name: t.seconds_per_1000_samples for t in timed},
        },
        "naive_over_single": naive.seconds_per_1000_samples / single.seconds_per_1000_samples,
        "naive_over_best_fix": naive.seconds_per_1000_samples / best.seconds_per_1000_samples,
    }
