"""Charts for the collectives notebook."""

from __future__ import annotations

__all__: list[str] = []
