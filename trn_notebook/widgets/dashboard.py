"""Dashboard: the four views in tabs, kept live (memory sampled while cells run, the rest after each cell)."""

from __future__ import annotations

from typing import Any

import ipywidgets

from ..session.events import CellFinished, cell_finished
from .cache_view import CacheView
from .memory import MemoryView
from .placement import PlacementView
from .tuner import ShapeTuner

TITLES = ("Placement", "Compile cache", "Shapes", "Memory")


class Dashboard(ipywidgets.Tab):
    """PlacementView, CacheView, ShapeTuner and a live MemoryView in tabs; refreshed after every cell."""

    def __init__(self, **kwargs: Any) -> None:
        self.placement = PlacementView()
        self.cache = CacheView()
        self.shapes = ShapeTuner()
        self.memory = MemoryView(live=True)
        views = (self.placement, self.cache, self.shapes, self.memory)
        super().__init__(children=views, titles=TITLES, **kwargs)
        self.add_class("trn-dashboard")
        self._unsubscribe = cell_finished.subscribe(self.on_cell_finished)

    @property
    def views(self) -> tuple[PlacementView, CacheView, ShapeTuner, MemoryView]:
        """The four views, in tab order."""
        return self.placement, self.cache, self.shapes, self.memory

    def refresh(self) -> None:
        """Refresh every view; a failing view shows its error and the others still refresh."""
        for view in self.views:
            view.guarded("refresh", view.refresh)

    def on_cell_finished(self, event: CellFinished) -> None:
        """Subscriber of the cell-finished event: refresh the views whose sources moved."""
        if event.changed:
            self.refresh_if_changed()

    def refresh_if_changed(self) -> list[str]:
        """Refresh the views whose sources changed (run after every cell); returns their tab titles."""
        return [title for title, view in zip(TITLES, self.views) if view.refresh_if_changed()]

    def close(self) -> None:
        """Stop the live updates and close the views."""
        self._unsubscribe()
        for view in self.views:
            view.close()
        super().close()

    def fallback_html(self) -> str:
        """The four views' static HTML, one after another."""
        return '<div class="trn-dashboard-fallback">' + "".join(v.fallback_html() for v in self.views) + "</div>"

    def fallback_text(self) -> str:
        """The four views' text summaries."""
        return "\n\n".join(v.fallback_text() for v in self.views)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        data = super()._repr_mimebundle_(**kwargs)
        if data is None:
            return None
        metadata: dict[str, Any] = {}
        if isinstance(data, tuple):
            data, metadata = data
        return {**data, "text/html": self.fallback_html(), "text/plain": self.fallback_text()}, metadata
