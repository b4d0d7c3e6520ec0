"""Charts for the parameter-server notebook."""

from __future__ import annotations

__all__: list[str] = []
