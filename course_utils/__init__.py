"""Helpers for parallel-training-course: the code its notebooks import.

A notebook's first cell is one line, for example
`from course_utils import allreduce, checks, launch, profiles`: the shared pieces by name,
and the folder of its chapter, which re-exports what the notebook calls. Heavy code lives
in the folders, with tests, so that each notebook keeps only its story.

Only the shared folders are imported here (`core`, `ranks`' launcher and `parallel`):
every rank imports this package, and a chapter is imported when a notebook names it.
"""

from __future__ import annotations

from . import parallel
from .core import checks, data, models, profiles, published, training
from .core.checks import verdict
from .core.errors import LaunchError
from .core.source import show
from .ranks.launch import launch, live_children

__version__ = "0.1.0"
