"""Every chart of the course: one function each, taking plain data, returning the figure.

One module per topic keeps each short; everything is importable from `course_utils.plots`.
The palette is Okabe-Ito, which stays distinct for colour-blind readers and in greyscale.
"""

from .style import PALETTE, new_figure

__all__ = ["PALETTE", "new_figure"]
