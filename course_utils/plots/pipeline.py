"""Charts for the pipeline notebook."""

from __future__ import annotations

__all__: list[str] = []
