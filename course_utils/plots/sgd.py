"""Charts for the sgd notebook."""

from __future__ import annotations

__all__: list[str] = []
