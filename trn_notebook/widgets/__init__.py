"""Notebook widgets over the single sources of truth (anywidget; ESM files in ``static/``, no CDN)."""

from .memory import MemoryView
from .placement import PlacementView

__all__ = ["MemoryView", "PlacementView"]
