"""Kernel side of the JupyterLab status-bar item: a comm that reports the device state.

When trn-notebook is loaded into IPython, :func:`register` opens a comm on the target
``trn-notebook-status`` carrying a :class:`StatusPayload`, then sends a new payload after
each cell whose payload differs from the last one sent. The payload is produced by a
callable handed in by the caller (``trn_notebook.status.status_payload``); this module
only transports it and never reads the device itself.

The front end (``labextension/src/index.ts``) registers the comm target on every kernel
connection. After a page reload it finds the open comm with a ``comm_info_request`` and
sends ``{"type": "request"}``, answered with the current payload.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from typing import Any, Literal, TypedDict

import comm
from comm.base_comm import BaseComm
from IPython.core.interactiveshell import InteractiveShell

from .. import state as _state
from ..session.events import cell_finished

__all__ = [
    "TARGET_NAME",
    "StatusComm",
    "StatusError",
    "StatusPayload",
    "register",
    "unregister",
]

log = logging.getLogger(__name__)

TARGET_NAME = "trn-notebook-status"


class StatusPayload(TypedDict):
    """What the status-bar item shows; one message per change."""

    type: Literal["status"]
    loaded: Literal[True]
    device: str  # "neuron:0" or "cpu"
    label: str  # "neuron:0 trn2 (sim)", "neuron:0 Trainium2 (TorchNeuron)" or "cpu"
    chip: str  # "trn2" (the simulator's chip model) or the hardware device's name
    memory_allocated: int  # bytes
    memory_capacity: int  # bytes (0: not reported)
    cache_hits: int | str  # "n/a" on hardware: TorchNeuron's metrics do not say whether the NEFF cache hit
    cache_misses: int | str
    fallback_ops: int
    text: str  # the status-bar line, formatted by the kernel (trn_notebook.presentation)
    title: str  # its tooltip, formatted by the kernel


class StatusError(TypedDict):
    """Sent instead of a status when ``payload_fn`` raised, so the item can say so."""

    type: Literal["error"]
    loaded: Literal[True]
    message: str


PayloadFn = Callable[[], StatusPayload]
Message = StatusPayload | StatusError


class StatusComm:
    """One comm to the front end, sending the payload only when it changed."""

    def __init__(self, payload_fn: PayloadFn) -> None:
        self.payload_fn = payload_fn
        self._comm: BaseComm | None = None
        self._last: Message | None = None
        self.unsubscribe: Callable[[], None] = lambda: None

    @property
    def is_open(self) -> bool:
        """Whether the comm is open (neither side has closed it)."""
        return self._comm is not None

    def open(self, shell: InteractiveShell | None = None) -> None:
        """Open the comm with the current payload; a no-op when it is already open.

        ``shell`` is accepted for symmetry with :func:`register`; the comm goes through
        whatever kernel ``comm.create_comm`` is bound to (ipykernel's, in a notebook).
        """
        if self._comm is not None:
            return
        message = self._message()
        opened = comm.create_comm(target_name=TARGET_NAME, data=dict(message))
        opened.on_msg(self._on_msg)
        opened.on_close(self._on_close)
        self._comm = opened
        self._last = message

    def refresh(self, *, force: bool = False) -> bool:
        """Send the payload if it changed since the last send (or ``force``); return whether sent."""
        if self._comm is None:
            return False
        message = self._message()
        if not force and message == self._last:
            return False
        self._comm.send(dict(message))
        self._last = message
        return True

    def close(self) -> None:
        """Close the comm; the front end then shows "trn: not loaded"."""
        opened, self._comm = self._comm, None
        self._last = None
        if opened is not None:
            opened.on_close(None)
            opened.close()

    def _message(self) -> Message:
        try:
            return self.payload_fn()
        except Exception as exc:  # the status bar must never break a cell
            log.warning("trn-notebook status payload failed", exc_info=True)
            return StatusError(type="error", loaded=True, message=f"{type(exc).__name__}: {exc}")

    def _on_msg(self, msg: dict[str, Any]) -> None:
        data = msg.get("content", {}).get("data", {})
        if isinstance(data, dict) and data.get("type") == "request":
            self.refresh(force=True)

    def _on_close(self, msg: dict[str, Any]) -> None:
        # The front end closed it (e.g. no extension to receive it): stop sending.
        self._comm = None
        self._last = None

    def on_cell_finished(self, event: object) -> None:
        """Send the payload if the cell changed it (a subscriber of the cell-finished event)."""
        try:
            self.refresh()
        except Exception:  # a broken transport must not print a traceback under every cell
            log.warning("trn-notebook status comm send failed", exc_info=True)


_registered: weakref.WeakKeyDictionary[InteractiveShell, StatusComm] = weakref.WeakKeyDictionary()
_state.register("status_comms", _state.Globals(__name__, "_registered"), reset=False)  # one comm per shell


def register(shell: InteractiveShell, payload_fn: PayloadFn) -> StatusComm:
    """Open the status comm and send changes after every cell; idempotent per shell.

    Registering again replaces ``payload_fn``, reopens the comm if the front end closed
    it, and sends the payload if it changed.
    """
    status = _registered.get(shell)
    if status is None:
        status = StatusComm(payload_fn)
        _registered[shell] = status
        status.unsubscribe = cell_finished.subscribe(status.on_cell_finished)
    status.payload_fn = payload_fn
    if status.is_open:
        status.refresh()
    else:
        status.open(shell)
    return status


def unregister(shell: InteractiveShell) -> None:
    """Stop the per-cell updates and close the comm; harmless when not registered."""
    status = _registered.pop(shell, None)
    if status is None:
        return
    try:
        status.unsubscribe()
    except ValueError:
        pass  # someone already removed the callback
    status.close()
