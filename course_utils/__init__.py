"""Helpers for parallel-training-course: the code its notebooks import.

Heavy code lives here, with tests, so that each notebook keeps only its story: a short
explanation, a call into this package, a chart from `plots`, and a verdict from `checks`.
Sizes come from `profiles.current()`; ranks are started with `launch.launch`.
"""

__version__ = "0.1.0"
