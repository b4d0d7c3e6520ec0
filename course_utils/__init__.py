"""Helpers for parallel-training-course.

Notebooks start with one line, ``from course_utils import *``-free:
``import course_utils as cu`` or the named imports they need; nothing a
notebook needs twice lives in the notebook.
"""

__version__ = "0.1.0"
