"""The simulator's check against the real link: fitted terms from runs of their own, rows that
say both clocks, and a verdict that is judged only on a quiet machine. How close the two
clocks come is `python -m course_utils bench simulator`'s to say, not a test's."""

from __future__ import annotations

import argparse

import pytest

from course_utils.allreduce import bench_simulator, simulator_check
from course_utils.core.machine import MachineShare
from course_utils.network import fit as network_fit


def test_the_check_fits_then_times_both_clocks_in_one_launch_for_each_fit():
    checks = simulator_check.against_the_real_link(2, (1 << 12,), repeats=1, fits=2)
    assert len(checks) == 2
    for check in checks:
        assert check["link"].name == "this-machine" and check["link"].both_ways_slowdown >= 1
        assert check["terms"].one_way.alpha > 0
        for clock in ("real", "simulated"):
            assert set(check[clock]) == set(simulator_check.ALGORITHMS)
            assert all(len(v) == 1 and v[0] > 0 for v in check[clock].values())
    assert set(simulator_check.ratios(checks)) == set(simulator_check.ALGORITHMS)


def test_three_ranks_fit_on_two_and_agree_on_the_link():
    """Ranks beyond the first two wait while 0 and 1 measure, then get the same link."""
    (check,) = simulator_check.against_the_real_link(3, (1 << 12,), repeats=1, fits=1)
    assert check["link"].emulated and set(check["simulated"]) == set(simulator_check.ALGORITHMS)


@pytest.mark.parametrize("fits", [0, 1.5, True])
def test_the_check_refuses_a_number_of_fits_that_is_not_a_count(fits):
    with pytest.raises(ValueError, match="fits must be a whole number"):
        simulator_check.against_the_real_link(2, (1 << 12,), fits=fits)


def _check(real: float, simulated: float) -> dict:
    return {
        "real": {"ring": [real, real]},
        "simulated": {"ring": [simulated, simulated]},
    }


def test_a_row_is_the_median_of_its_fits_so_one_fit_a_third_off_does_not_move_it():
    checks = [_check(1.0, 1.05), _check(1.0, 1.4), _check(1.0, 0.95)]
    assert simulator_check.ratios(checks) == {"ring": [pytest.approx(1.05)] * 2}
    assert simulator_check.medians(checks, "simulated") == {"ring": [1.05, 1.05]}


def _bench(monkeypatch, simulated_over_real: float, busy: bool = False) -> dict:
    share = MachineShare(cores=2, seconds=1.0, others_cores=1.0 if busy else 0.0, machine_cores=2)
    monkeypatch.setattr("course_utils.core.machine.machine_cores", lambda: 2)
    monkeypatch.setattr(
        "course_utils.core.machine.on_a_quiet_machine", lambda measure, cores: (measure(), share)
    )
    sizes = network_fit.FIT_BYTES
    terms = network_fit.fit_link_terms(
        sizes,
        {
            "one_way": [1e-5 + n * 1e-9 for n in sizes],
            "both_ways": [1e-5 + n * 2e-9 for n in sizes],
            "add": [n * 1e-10 for n in sizes],
        },
    )
    monkeypatch.setattr(
        simulator_check,
        "against_the_real_link",
        lambda world, nbytes, repeats, fits: (
            [
                {
                    "terms": terms,
                    "link": terms.link(),
                    "real": {a: [0.01] * len(nbytes) for a in simulator_check.ALGORITHMS},
                    "simulated": {
                        a: [0.01 * simulated_over_real] * len(nbytes)
                        for a in simulator_check.ALGORITHMS
                    },
                }
            ]
            * fits
        ),
    )
    parser = argparse.ArgumentParser()
    bench_simulator.add_arguments(parser)
    return bench_simulator.run(parser.parse_args([]))


def test_bench_meets_its_target_only_when_every_large_row_is_within_30_percent(monkeypatch):
    result = _bench(monkeypatch, 1.2)
    assert result["met"] is True and result["judged"] is True
    assert {r["world_size"] for r in result["rows"]} == {2}
    assert len(result["rows"]) == 4 * 3  # four algorithms, 1, 4 and 16 MiB
    assert len(result["fitted"][2]) == 5  # one row of terms per fit, five by default
    assert result["fitted"][2][0]["both_ways_gb_s_each"] == pytest.approx(0.5)
    assert _bench(monkeypatch, 1.5)["met"] is False  # the simulator 50% off


def test_bench_is_not_judged_when_the_machine_was_busy(monkeypatch):
    result = _bench(monkeypatch, 1.0, busy=True)
    assert result["judged"] is False and result["met"] is None


def test_the_chart_titles_the_spread_of_simulated_over_real():
    from course_utils.allreduce import simulator_against_real
    from course_utils.network import fabric

    check = {
        "link": fabric.parse("20000mbit,80us,both-ways=12000mbit"),
        "real": {"ring": [1e-3, 4e-3], "tree": [1e-3, 4e-3]},
        "simulated": {"ring": [0.8e-3, 4.4e-3], "tree": [1.2e-3, 4e-3]},
    }
    title = simulator_against_real([check], [1 << 20, 1 << 22], 2).axes[0].get_title()
    assert title.startswith("N = 2: simulated / real from 0.80 to 1.20 (median 1.05; ")
    assert "real clock" in title and "12 Gbit/s each way" in title


def _nodes_bench(monkeypatch, tmp_path, rows: list[dict]) -> dict:
    """`bench simulator --nodes` with the nodes' check replaced by one that says a line and
    returns `rows`, as cluster_check's `simulator_rows` does."""
    script = tmp_path / "cluster_check.py"
    script.write_text(
        "def simulator_rows(log_dir):\n"
        "    print('simulator set to the probes between two nodes')\n"
        f"    return {rows!r}\n"
    )
    monkeypatch.setattr(bench_simulator, "NODES_CHECK", script)
    parser = argparse.ArgumentParser()
    bench_simulator.add_arguments(parser)
    return bench_simulator.run(parser.parse_args(["--nodes"]))


def _node_row(ratio: float, judged: bool = True) -> dict:
    row = {"algorithm": "ring", "world_size": 8, "bytes": 1 << 20, "real_seconds": 0.2}
    return {**row, "simulated_over_real": ratio, "judged": judged}


def test_bench_on_nodes_meets_its_target_only_when_every_judged_row_is_within_30_percent(
    monkeypatch, tmp_path, capsys
):
    result = _nodes_bench(monkeypatch, tmp_path, [_node_row(0.72), _node_row(1.2)])
    assert result["met"] is True and len(result["rows"]) == 2
    assert "simulator set to the probes" in capsys.readouterr().out  # its output shows
    assert _nodes_bench(monkeypatch, tmp_path, [_node_row(0.68)])["met"] is False
    not_judged = [_node_row(0.1, judged=False)] * 3  # the cores, not the wire, set the time
    assert _nodes_bench(monkeypatch, tmp_path, not_judged[:2])["met"] is True
    assert _nodes_bench(monkeypatch, tmp_path, not_judged)["met"] is False


def test_bench_on_nodes_says_where_the_check_is_when_it_is_missing(monkeypatch, tmp_path):
    monkeypatch.setattr(bench_simulator, "NODES_CHECK", tmp_path / "absent" / "check.py")
    with pytest.raises(SystemExit, match="clone of the course's repository"):
        bench_simulator.run(argparse.Namespace(nodes=True))
