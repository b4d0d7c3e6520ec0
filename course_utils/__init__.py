"""Helpers for parallel-training-course: the code its notebooks import.

A notebook's first cell is one line, for example
`from course_utils import allreduce, checks, launch, profiles`: the shared pieces by name,
and the folder of its chapter, which re-exports what the notebook calls. Heavy code lives
in the folders, with tests, so that each notebook keeps only its story.

Names are resolved on first use, so `import course_utils` (the command line, every rank
under torchrun) does not pay for every chapter's imports.
"""

from __future__ import annotations

from .core.lazy import names_on_first_use

__version__ = "0.1.0"

_SHARED = {
    "checks": ("core.checks", None),
    "data": ("core.data", None),
    "models": ("core.models", None),
    "profiles": ("core.profiles", None),
    "training": ("core.training", None),
    "verdict": ("core.checks", "verdict"),
    "show": ("core.source", "show"),
    "parallel": ("parallel", None),
    "launch": ("ranks.launch", "launch"),
    "live_children": ("ranks.launch", "live_children"),
    "LaunchError": ("core.errors", "LaunchError"),
}

__all__ = sorted(_SHARED)


__getattr__ = names_on_first_use(__name__, _SHARED, globals())
