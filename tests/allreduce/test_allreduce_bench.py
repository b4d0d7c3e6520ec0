"""`bench allreduce`: rows that name their clock, the schedule check, the paired ratio, busbw."""

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
    if out["judged"]:
        assert out["met"] == (out["ratio_to_builtin"]["ring"] <= bench.RING_TARGET)
    else:
        assert out["met"] is None
    assert "builtin" in out["median_seconds"] and out["clock"] == "real"
    assert {r["clock"] for r in out["rows"]} == {"real"}


def test_by_default_both_clocks_run_and_every_row_names_its_own(monkeypatch):
    small = replace(profiles.get("cpu").collectives, message_bytes=(1 << 10, 1 << 14))
    monkeypatch.setattr(
        profiles, "current", lambda: replace(profiles.get("cpu"), collectives=small)
    )
    out = bench.run(_args("--world-sizes", "2", "--size-mb", "0.25", "--repeats", "1"))
    clocks = {r["clock"] for r in out["rows"]}
    assert clocks == {"real", "simulated"} and "simulated:" in out["target"]
    builtin = [r for r in out["rows"] if r["clock"] == "simulated" and r["algorithm"] == "builtin"]
    assert builtin and all(r["meets_target"] is None for r in builtin)  # charged as a ring
    assert out["simulated"]["met"] is True  # the hand-written schedules, on the link's terms
    assert all(r["world_size"] == 2 for r in out["rows"] if r["clock"] == "real")


def test_busbw_sweep_gives_algbw_and_busbw_per_size(monkeypatch):
    small = replace(profiles.get("cpu").collectives, busbw_bytes=(1 << 12, 1 << 16))
    monkeypatch.setattr(
        profiles, "current", lambda: replace(profiles.get("cpu"), collectives=small)
    )
    out = bench.run(_args("--busbw", "--link", "real", "--world-size", "3", "--repeats", "2"))
    assert [(r["algorithm"], r["bytes"]) for r in out["rows"]] == [
        (a, n) for a in ("ring", "builtin") for n in (1 << 12, 1 << 16)
    ]
    assert all(r["seconds"] > 0 for r in out["rows"])  # measured: their values are a bench's
    slow = bench.run(_args("--busbw", "--link", "1gbit,1ms", "--world-size", "2", "--repeats", "1"))
    assert slow["clock"] == "simulated" and slow["met"] is None  # the link's rate by design


def test_busbw_rows_follow_nccl_tests_formula_on_a_fake_clock(monkeypatch):
    """No time is measured here: `time_allreduce` is replaced by a clock that returns 1 ms
    and 2 ms, so what is checked is the arithmetic busbw = algbw · 2(N-1)/N, not a speed."""
    small = replace(profiles.get("cpu").collectives, busbw_bytes=(1 << 12, 1 << 16))
    monkeypatch.setattr(
        profiles, "current", lambda: replace(profiles.get("cpu"), collectives=small)
    )

    def fake_clock(world, sizes, repeats, algorithms, link=None, every_repeat=False):
        return {a: [[1e-3 * (i + 1)] * repeats for i, _ in enumerate(sizes)] for a in algorithms}

    from course_utils.allreduce import runs

    monkeypatch.setattr(runs, "time_allreduce", fake_clock)
    faked = bench.run(_args("--busbw", "--link", "real", "--world-size", "3", "--repeats", "2"))
    assert [r["seconds"] for r in faked["rows"]] == [1e-3, 2e-3] * 2
    for row in faked["rows"]:  # nccl-tests: busbw = algbw * 2(N-1)/N, on the fake clock
        algbw = row["bytes"] / row["seconds"] / 1e6  # the fake 1 ms or 2 ms, asserted above
        assert row["algbw_mb_s"] == round(algbw, 2)
        assert row["busbw_mb_s"] == round(algbw * 4 / 3, 2)  # 2(N-1)/N at N = 3


def test_link_auto_runs_real_where_the_sweep_fits_the_cores_and_simulated_otherwise(monkeypatch):
    ran = []
    monkeypatch.setattr(bench, "_against_schedule", lambda link, args: ran.append(link.spec))
    monkeypatch.setattr(bench, "_against_builtin", lambda args: ran.append("real"))
    monkeypatch.setattr("course_utils.core.machine.machine_cores", lambda: 4)
    bench.run(_args("--link", "auto", "--world-sizes", "2,4"))
    bench.run(_args("--link", "auto", "--world-sizes", "2,4,8"))
    assert ran == ["real", profiles.get("cpu").simulated_link]
