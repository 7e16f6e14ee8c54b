"""What every trn-notebook widget shares: error reporting as data, message dispatch, static fallbacks.

A widget subclasses :class:`TrnWidget`, sets ``_esm = esm("<file>.js")`` (its file in ``static/``), keeps its state
in synced traitlets, implements :meth:`TrnWidget.refresh` (re-read the single sources of truth),
:meth:`TrnWidget.fallback_html` and :meth:`TrnWidget.fallback_text` (what a saved or exported
notebook shows), and handles front-end messages ``{"type": "<name>", ...}`` in ``_on_<name>``
methods. An exception in a handler is logged and sent to the front end as data (the ``error`` trait
and a ``{"type": "error"}`` message); it never escapes into the kernel's comm machinery.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Literal, TypedDict

import anywidget
import traitlets

log = logging.getLogger("trn_notebook.widgets")

STATIC = Path(__file__).parent / "static"
CSS = STATIC / "widgets.css"
DOM_HELPERS = STATIC / "_dom.js"  # el(), svg(): the DOM helpers every widget shares, written once


def esm(name: str) -> str:
    """A widget's ES module: the shared DOM helpers (``static/_dom.js``) followed by its own ``static/<name>``.

    anywidget takes the module's text; no import is needed (or allowed: nothing loads from the network).
    Raises ``OSError`` if a file is missing from the installation.
    """
    return DOM_HELPERS.read_text() + "\n" + (STATIC / name).read_text()


class ErrorMessage(TypedDict):
    """Sent to the front end when a handler failed; the view shows ``message`` in a banner."""

    type: Literal["error"]
    message: str


class TrnWidget(anywidget.AnyWidget):
    """Base of the trn-notebook widgets (an anywidget with error-as-data and a static fallback)."""

    _css = CSS
    error = traitlets.Unicode("").tag(sync=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.on_msg(self._dispatch)

    # -- to override ---------------------------------------------------------------------------
    def refresh(self) -> None:
        """Re-read the single sources of truth into the synced state."""
        raise NotImplementedError

    def fallback_html(self) -> str:
        """Static HTML of the current figures (every user string escaped)."""
        raise NotImplementedError

    def fallback_text(self) -> str:
        """Plain-text summary of the current figures."""
        raise NotImplementedError

    def source_version(self) -> Any:
        """A cheap token that changes when the sources this view reads change (None: unknown)."""
        return None

    def refresh_if_changed(self) -> bool:
        """Refresh only if :meth:`source_version` moved since the last time (after each cell); True if refreshed."""
        try:
            version = self.source_version()
        except Exception:
            version = None
        if version is not None and version == getattr(self, "_seen_version", None):
            return False
        self._seen_version = version
        return self.guarded("refresh", self.refresh)

    # -- messages ------------------------------------------------------------------------------
    def set_state(self, sync_data: dict[str, Any]) -> None:
        """Apply a state update from the front end; a bad value is reported as data, not raised."""
        try:
            super().set_state(sync_data)
        except Exception as exc:  # e.g. a value of the wrong type; traitlets rolled the update back
            log.debug("%s: state update from the front end failed", type(self).__name__, exc_info=True)
            self.report_error(f"{type(exc).__name__}: {exc}")

    def _dispatch(self, _widget: Any, content: Any, _buffers: list[bytes] | None) -> None:
        kind = content.get("type") if isinstance(content, dict) else None
        handler = getattr(self, f"_on_{kind}", None) if isinstance(kind, str) and kind.isidentifier() else None
        if handler is None:
            self.report_error(f"unknown message from the front end: {content!r:.200}")
            return
        try:
            handler(content)
        except Exception as exc:  # widget comm errors are data for the front end, not kernel tracebacks
            log.debug("%s failed to handle %r", type(self).__name__, kind, exc_info=True)
            self.report_error(f"{kind}: {type(exc).__name__}: {exc}")

    def _on_refresh(self, _content: dict[str, Any]) -> None:
        self.refresh()

    def report_error(self, message: str) -> None:
        """Log ``message`` and show it in the view (trait ``error`` and an ``error`` message)."""
        log.info("%s: %s", type(self).__name__, message)
        self.error = message
        self.send(ErrorMessage(type="error", message=message))

    def guarded(self, what: str, fn: Any, *args: Any) -> bool:
        """Run ``fn(*args)``; on an exception, report it as data and return False (True otherwise)."""
        try:
            fn(*args)
        except Exception as exc:
            log.debug("%s: %s failed", type(self).__name__, what, exc_info=True)
            self.report_error(f"{what}: {type(exc).__name__}: {exc}")
            return False
        return True

    # -- display -------------------------------------------------------------------------------
    def _repr_mimebundle_(self, **kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is None:
            return None
        data, metadata = bundle
        data = {**data, "text/html": self.fallback_html(), "text/plain": self.fallback_text()}
        return data, metadata
