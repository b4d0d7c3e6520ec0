"""Every chart of the course: one function each, taking plain data, returning the figure.

One module per topic keeps each short; every chart is importable as `plots.<name>`.
The palette is Okabe-Ito, which stays distinct for colour-blind readers and in greyscale.
"""

from .collectives import *  # noqa: F403
from .ddp import *  # noqa: F403
from .landscape import *  # noqa: F403
from .launching import *  # noqa: F403
from .param_server import *  # noqa: F403
from .pipeline import *  # noqa: F403
from .scaling import *  # noqa: F403
from .sgd import *  # noqa: F403
from .style import PALETTE as PALETTE
from .style import new_figure as new_figure
