"""Which widget shows a result: result types never import their views (issue 51: no import runs back up).

A widget module registers its factory for the result type it shows (``register_view(ProfileResult,
TimelineWidget.of)``); a result's ``widget()`` asks :func:`view_for`. The views live in
:mod:`trn_notebook.widgets`, which :func:`view_for` imports by name the first time a view is asked for and none
is registered yet — the lazy-import shape of ``torch/_dynamo/backends/registry.py`` (``lookup_backend``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

VIEW_PROVIDER = "trn_notebook.widgets"
"""The package whose import registers every view (each widget module registers its own at import)."""

_VIEWS: dict[type, Callable[[Any], Any]] = {}


def register_view(result_type: type, factory: Callable[[Any], Any]) -> None:
    """Make ``factory(result)`` the view of every ``result_type`` (called by a widget module at import)."""
    _VIEWS[result_type] = factory


def _factory(obj: Any) -> Callable[[Any], Any] | None:
    return next((_VIEWS[t] for t in type(obj).__mro__ if t in _VIEWS), None)


def view_for(obj: Any) -> Any:
    """The widget that shows ``obj``, built by the factory registered for its type (or a base type).

    Raises ``LookupError`` when no widget module registers a view for it.
    """
    factory = _factory(obj)
    if factory is None:
        importlib.import_module(VIEW_PROVIDER)  # its widget modules register their views at import
        factory = _factory(obj)
    if factory is None:
        raise LookupError(f"no widget shows a {type(obj).__name__}; its text and HTML renderings still do")
    return factory(obj)
