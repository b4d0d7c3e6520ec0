"""`bench allreduce` on the real link: the paired ring/built-in ratio and the busbw sweep."""

from __future__ import annotations

import argparse
from dataclasses import replace

from course_utils.allreduce import bench
from course_utils.core import profiles


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_real_link_reports_paired_ratios_and_its_target():
    out = bench.run(
        _args("--link", "real", "--world-size", "2", "--size-mb", "0.25", "--repeats", "2")
    )
    assert set(out["ratio_to_builtin"]) == {"parameter_server", "tree", "butterfly", "ring"}
    assert all(r > 0 for r in out["ratio_to_builtin"].values())
    assert out["met"] == (out["ratio_to_builtin"]["ring"] <= bench.RING_TARGET)
    assert "builtin" in out["median_seconds"]


def test_busbw_sweep_gives_algbw_and_busbw_per_size(monkeypatch):
    small = replace(profiles.get("cpu").collectives, busbw_bytes=(1 << 12, 1 << 16))
    monkeypatch.setattr(
        profiles, "current", lambda: replace(profiles.get("cpu"), collectives=small)
    )
    out = bench.run(_args("--busbw", "--link", "real", "--world-size", "3", "--repeats", "2"))
    assert [(r["algorithm"], r["bytes"]) for r in out["rows"]] == [
        (a, n) for a in ("ring", "builtin") for n in (1 << 12, 1 << 16)
    ]
    for row in out["rows"]:  # nccl-tests: busbw = algbw * 2(N-1)/N
        assert abs(row["busbw_mb_s"] - row["algbw_mb_s"] * 4 / 3) <= 0.02
    slow = bench.run(_args("--busbw", "--link", "1gbit,1ms", "--world-size", "2", "--repeats", "1"))
    assert "link's" in slow["target"] and isinstance(slow["met"], bool)
