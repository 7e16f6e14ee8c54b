"""What each ``%trn`` subcommand displays: the matching widget when it is available, else the result.

One small function per view. Set :data:`prefer_widgets` to ``False`` to always get the plain
result objects (HTML with a text/plain fallback), e.g. for nbconvert-only workflows or tests.
"""

from __future__ import annotations

import importlib
import logging
import time
from typing import Any

from ..display.results import Message, Result, fmt_s

log = logging.getLogger(__name__)

prefer_widgets = True
WIDGET_MAX_OPS = 2_000  # above this the placement widget takes > 50 ms to build (benchmarks/bench_magics.py)


def widget(widget_name: str, fallback: Result, **kwargs: Any) -> Any:
    """``trn_notebook.widgets.<widget_name>(**kwargs)`` if importable and constructible, else ``fallback``."""
    if not prefer_widgets:
        return fallback
    try:
        cls = getattr(importlib.import_module("trn_notebook.widgets"), widget_name)
    except (ImportError, AttributeError):
        return fallback
    try:
        return cls(**kwargs)
    except Exception:  # a broken widget must not hide the figures
        log.warning("trn-notebook widget %s failed; showing the table instead", widget_name, exc_info=True)
        return fallback


def simulator_only(what: str, instead: str) -> Message | None:
    """On hardware, the message that ``what`` is simulator-only and what to use instead; None on the simulator."""
    from .. import facts

    backend = facts.current()
    if backend.is_simulator:
        return None
    return Message(f"{what} is simulator-only (n/a with {backend.name}). On hardware: {instead}", "warning")


def render_ops(result: Result, *, reset: bool) -> Any:
    """The placement view; the table when the log was just reset (the cleared rows stay visible) or is
    longer than :data:`WIDGET_MAX_OPS` ops (the table shows the top ops and stays within 50 ms)."""
    from .. import facts

    if reset or len(facts.current().placement()) > WIDGET_MAX_OPS:
        return result
    return widget("PlacementView", result)


def render_memory(result: Result) -> Any:
    """The memory view."""
    return widget("MemoryView", result)


def render_cache(result: Result) -> Any:
    """The compile-cache view."""
    return widget("CacheView", result)


def render_shapes(result: Result, name: str | None) -> Any:
    """The shape tuner for one callable, else the shapes tables."""
    return widget("ShapeTuner", result, name=name) if name else result


def render_numerics(result: Result) -> Any:
    """The per-layer numerics curve, else the comparison's tables."""
    return widget("NumericsView", result, result=result)


def render_dashboard(result: Result) -> Any:
    """The dashboard widget, else status, placement and memory stacked."""
    return widget("Dashboard", result)


class ProgressLine(Result):
    """``compiling <name>: <stage> (<elapsed>)`` — the live line shown while a cell compiles."""

    def __init__(self, name: str, stage: str, elapsed_s: float) -> None:
        self.message = Message(f"compiling {name}: {stage} ({fmt_s(elapsed_s)})")

    def parts(self) -> list[Result]:
        return [self.message]


class LiveProgress:
    """A display handle updated with each compiler stage, then replaced by the summary."""

    def __init__(self, name: str) -> None:
        from IPython.display import display

        self.name = name
        self.t0 = time.perf_counter()
        self.handle = display(ProgressLine(name, "starting", 0.0), display_id=True)

    def __call__(self, stage: str, elapsed_s: float, graph_name: str) -> None:
        if self.handle is not None:
            label = f"{graph_name} " if graph_name and graph_name != self.name else ""
            self.handle.update(ProgressLine(self.name, f"{label}{stage}", elapsed_s))

    def finish(self, result: object) -> None:
        """Replace the progress line with ``result``."""
        if self.handle is not None:
            self.handle.update(result)
