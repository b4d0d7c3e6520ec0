"""The course's look reaches every chart, though pyplot is imported only for the first."""

from __future__ import annotations

from matplotlib.colors import to_hex

from course_utils.core import style


def test_a_new_figure_has_the_course_palette_and_grid():
    fig, (ax,) = style.new_figure()
    colours = [to_hex(c["color"]).upper() for c in style.pyplot().rcParams["axes.prop_cycle"]]
    assert colours == [c.upper() for c in style.PALETTE]
    assert all(line.get_visible() for line in ax.xaxis.get_gridlines())
    assert not ax.spines["top"].get_visible() and not ax.spines["right"].get_visible()
    assert fig.dpi == 90
    assert style.finished(fig) is fig
    assert not style.pyplot().fignum_exists(fig.number)  # pyplot let go of it
