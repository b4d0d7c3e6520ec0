"""Names a package hands out on first use, so that importing it costs nothing.

`import course_utils` (the command line), every rank (it imports `course_utils.ranks`) and
torchrun's workers (they start inside `course_utils.failures` and must tie themselves to
their agent before paying for torch) import packages whose names a notebook wants at hand.
A package keeps a table of where each name lives and gets a module `__getattr__` from here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

__all__ = ["names_on_first_use"]


def names_on_first_use(package: str, where: dict, namespace: dict) -> Callable[[str], object]:
    """A module `__getattr__` for `package`: `where[name]` is (module, attribute), relative
    to the package, the attribute None for the module itself. A name once loaded is kept in
    the package's `namespace`, so it is looked up only once."""

    def __getattr__(name: str):
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module_name, attribute = where[name]
        module = importlib.import_module(f"{package}.{module_name}")
        value = module if attribute is None else getattr(module, attribute)
        namespace[name] = value
        return value

    return __getattr__
