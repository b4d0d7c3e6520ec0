"""Chart titles of notebook 05 follow the data, and legends sit where they cover no line."""

from __future__ import annotations

import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg

from course_utils.allreduce import charts, link_charts
from course_utils.allreduce.trace import RoundLog, Trace


def _traces(start: list, end: list) -> list:
    return [
        Trace(
            [RoundLog(label, value=torch.tensor(v)) for label, v in (("start", a), ("exchange", b))]
        )
        for a, b in zip(start, end, strict=True)
    ]


def test_rounds_title_says_whether_every_rank_holds_the_sum():
    done = charts.allreduce_rounds(_traces([[1], [2]], [[3], [3]]), "butterfly")
    assert "every rank holds the sum after 1 rounds" in done._suptitle.get_text()
    half = charts.allreduce_rounds(_traces([[1], [2]], [[3], [2]]), "butterfly")
    assert "1 of 2 hold the sum" in half._suptitle.get_text()


def test_bytes_title_names_who_stays_on_the_floor():
    floor = {2: 1.0, 4: 1.5}
    ring_only = charts.bytes_per_rank_bars({"tree": {2: 1, 4: 2}, "ring": {2: 1, 4: 1.5}}, floor)
    assert ring_only.axes[0].get_title() == (
        "Only the ring sends no more than the floor at every N;\nat N = 2 every algorithm does"
    )
    nobody = charts.bytes_per_rank_bars({"tree": {2: 1, 4: 2}, "ring": {2: 1, 4: 1.7}}, floor)
    assert nobody.axes[0].get_title().startswith("Every algorithm's busiest rank sends more")


def _legend_outside(ax) -> bool:
    canvas = FigureCanvasAgg(ax.figure)  # the chart let go of pyplot's canvas
    canvas.draw()
    renderer = canvas.get_renderer()
    box, legend = ax.get_window_extent(renderer), ax.get_legend().get_window_extent(renderer)
    return legend.x0 >= box.x1


def test_busbw_sweep_title_and_legend_follow_the_data():
    sizes = [1 << 12, 1 << 20, 1 << 26]
    curves = {
        ("real link", "ring"): (sizes, [1e-4, 1e-3, 4e-2]),
        ("real link", "builtin"): (sizes, [1e-4, 1e-3, 4e-2]),
        ("emulated 100 Mbit/s link, α = 5 ms", "ring"): (sizes, [1e-2, 0.1, 5.4]),
    }
    fig = link_charts.bus_bandwidth_sweep(curves, 2, link_rate=12.5e6)
    title = fig._suptitle.get_text()
    assert "real link: 1,678 MB/s at 64 MiB, half of that from 1 MiB on" in title
    assert "emulated 100 Mbit/s link: 12 MB/s at 64 MiB, half of that from 1 MiB on" in title
    assert title.endswith("emulated 100 Mbit/s link, α = 5 ms")  # the subtitle says so
    assert _legend_outside(fig.axes[0])


def test_time_against_ranks_titles_growth_and_keeps_legend_off_the_lines():
    by_n = {2: {"ring": [1.0], "tree": [1.0]}, 8: {"ring": [2.0], "tree": [4.0]}}
    fig = link_charts.time_against_ranks(by_n, 1000)
    assert "ring x2.0" in fig.axes[0].get_title() and "tree x4.0" in fig.axes[0].get_title()
    assert _legend_outside(fig.axes[0])


def test_the_link_dial_reads_the_profiles_5_ms_and_redraws(monkeypatch):
    """The 5 ms link must read 5 ms on the dial (a coarse log step showed 5.01187 ms)."""
    import math

    from course_utils.allreduce import dial
    from course_utils.network import fabric

    shown = []
    monkeypatch.setattr("IPython.display.display", lambda *a: shown.extend(a))
    monkeypatch.setattr("matplotlib.get_backend", lambda: "module://ipympl.backend_nbagg")
    box = dial.link_dial(fabric.parse("100mbit,5ms"), world_size=4)
    rate, alpha, ranks = box.children
    for slider, wanted in ((alpha, 5.0), (rate, 100.0)):
        exponent = math.log10(wanted)
        on_a_step = 10 ** (round((exponent - slider.min) / slider.step) * slider.step + slider.min)
        assert abs(on_a_step / wanted - 1) < 1e-3 and slider.readout_format == ".3g"
    figure = shown[-1].figure
    alpha.value = 0.01  # a faster link: the title follows the dial
    assert "10 µs" in figure.axes[0].get_title() and "N = 4" in figure.axes[0].get_title()
    monkeypatch.setattr("matplotlib.get_backend", lambda: "agg")
    assert dial.link_dial(fabric.parse("100mbit,5ms")) is None  # a plain picture instead
