"""Kernel side of the JupyterLab status-bar item: a comm target that reports the device state.

When trn-notebook is loaded into IPython, :func:`register` registers the comm target
``trn-notebook-status`` with the kernel's comm manager; it opens no comm itself, so a kernel with no
front end to receive one (nbclient, nbconvert, papermill, ``python -m trn_notebook.quickstart``) sees
no comm traffic at all. The front end (``labextension/src/index.ts``) opens a comm on that target when
it sees the kernel (on each kernel change, after a restart and after each execution until one is open;
the kernel closes it at once while the target is not registered). Over every comm a front end opened,
the kernel sends a :class:`StatusPayload` at once, then a new one after each cell whose payload differs
from the last one sent. The payload is produced by a callable handed in by the caller
(``trn_notebook.facts.status.status_payload``); this module only transports it and never reads the device.

After a page reload the front end finds the comm it had opened with a ``comm_info_request`` and sends
``{"type": "request"}`` on it, answered with the current payload.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from typing import Any, Protocol

import comm
from comm.base_comm import BaseComm
from IPython.core.interactiveshell import InteractiveShell

from .. import state as _state
from ..facts.status import StatusError, StatusPayload
from ..session.events import cell_finished

__all__ = [
    "TARGET_NAME",
    "StatusComm",
    "StatusError",
    "StatusPayload",
    "comm_manager",
    "register",
    "unregister",
]

log = logging.getLogger(__name__)

TARGET_NAME = "trn-notebook-status"


PayloadFn = Callable[[], StatusPayload]
Message = StatusPayload | StatusError


class CommManagerLike(Protocol):
    """What this module uses of a kernel's comm manager (``comm.base_comm.CommManager``, ipykernel's)."""

    targets: dict[str, Any]

    def register_target(self, target_name: str, f: Any) -> None:
        """Call ``f(comm, msg)`` when a front end opens a comm on ``target_name``."""

    def unregister_target(self, target_name: str, f: Any) -> Any:
        """Forget ``target_name``."""


def comm_manager(shell: InteractiveShell) -> CommManagerLike:
    """The comm manager the kernel of ``shell`` dispatches ``comm_open`` to: ipykernel's
    ``kernel.comm_manager`` in a Jupyter kernel, else the ``comm`` package's (a terminal IPython, where
    no front end can open a comm and registering is harmless)."""
    manager = getattr(getattr(shell, "kernel", None), "comm_manager", None)
    return manager if manager is not None else comm.get_comm_manager()  # type: ignore[no-any-return]


class StatusComm:
    """The comms the front ends opened on the target, each sent the payload when it changed."""

    def __init__(self, payload_fn: PayloadFn) -> None:
        self.payload_fn = payload_fn
        self._comms: dict[str, BaseComm] = {}
        self._last: Message | None = None
        self.unsubscribe: Callable[[], None] = lambda: None

    @property
    def is_open(self) -> bool:
        """Whether a front end has a comm open (none has closed every comm it opened)."""
        return bool(self._comms)

    def attach(self, opened: BaseComm, msg: dict[str, Any] | None = None) -> None:
        """The comm target's handler: a front end opened ``opened``; send it the current payload.

        When the payload changed since the last send, every open comm gets it (they all show one state).
        """
        comm_id = opened.comm_id
        opened.on_msg(lambda m: self._on_msg(comm_id, m))
        opened.on_close(lambda m: self._on_close(comm_id))
        self._comms[comm_id] = opened
        message = self._message()
        if message != self._last:
            self._send_all(message)
        else:
            opened.send(dict(message))

    def refresh(self, *, force: bool = False) -> bool:
        """Send the payload to every open comm if it changed since the last send (or ``force``); return
        whether sent. Reads nothing while no front end has a comm open."""
        if not self._comms:
            return False
        message = self._message()
        if not force and message == self._last:
            return False
        self._send_all(message)
        return True

    def close(self) -> None:
        """Close every comm; the front ends then show "trn: not loaded"."""
        opened, self._comms = list(self._comms.values()), {}
        self._last = None
        for c in opened:
            c.on_close(None)  # type: ignore[arg-type]
            c.close()

    def _send_all(self, message: Message) -> None:
        for c in list(self._comms.values()):
            c.send(dict(message))
        self._last = message

    def _message(self) -> Message:
        try:
            return self.payload_fn()
        except Exception as exc:  # the status bar must never break a cell
            log.warning("trn-notebook status payload failed", exc_info=True)
            return StatusError(type="error", loaded=True, message=f"{type(exc).__name__}: {exc}")

    def _on_msg(self, comm_id: str, msg: dict[str, Any]) -> None:
        data = msg.get("content", {}).get("data", {})
        opened = self._comms.get(comm_id)
        if opened is not None and isinstance(data, dict) and data.get("type") == "request":
            opened.send(dict(self._message()))

    def _on_close(self, comm_id: str) -> None:
        # That front end closed its comm: stop sending to it.
        self._comms.pop(comm_id, None)
        if not self._comms:
            self._last = None

    def on_cell_finished(self, event: object) -> None:
        """Send the payload if the cell changed it (a subscriber of the cell-finished event)."""
        try:
            self.refresh()
        except Exception:  # a broken transport must not print a traceback under every cell
            log.warning("trn-notebook status comm send failed", exc_info=True)


_registered: weakref.WeakKeyDictionary[InteractiveShell, StatusComm] = weakref.WeakKeyDictionary()
_state.register("status_comms", _state.Globals(__name__, "_registered"), reset=False)  # one per shell


def register(shell: InteractiveShell, payload_fn: PayloadFn) -> StatusComm:
    """Register the comm target on the kernel of ``shell`` and send changes after every cell over the
    comms front ends open on it; idempotent per shell (no comm is opened here).

    Registering again replaces ``payload_fn`` and sends the payload if it changed.
    """
    status = _registered.get(shell)
    if status is None:
        status = StatusComm(payload_fn)
        _registered[shell] = status
        status.unsubscribe = cell_finished.subscribe(status.on_cell_finished)
    status.payload_fn = payload_fn
    comm_manager(shell).register_target(TARGET_NAME, status.attach)
    status.refresh()
    return status


def unregister(shell: InteractiveShell) -> None:
    """Stop the per-cell updates, close the comms and unregister the target; harmless when not registered."""
    status = _registered.pop(shell, None)
    if status is None:
        return
    try:
        status.unsubscribe()
    except ValueError:
        pass  # someone already removed the callback
    manager = comm_manager(shell)
    if manager.targets.get(TARGET_NAME) == status.attach:
        manager.unregister_target(TARGET_NAME, status.attach)
    status.close()
