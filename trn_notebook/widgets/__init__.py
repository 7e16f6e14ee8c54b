"""Notebook widgets over the single sources of truth (anywidget; ESM files in ``static/``, no CDN)."""

from .cache_view import CacheView
from .dashboard import Dashboard
from .memory import MemoryView
from .memory_snapshot import MemorySnapshotWidget
from .numerics import NumericsView
from .placement import PlacementView
from .plan import PlanView
from .timeline import TimelineWidget
from .tuner import ShapeTuner

__all__ = [
    "CacheView",
    "Dashboard",
    "MemorySnapshotWidget",
    "MemoryView",
    "NumericsView",
    "PlacementView",
    "PlanView",
    "ShapeTuner",
    "TimelineWidget",
]
