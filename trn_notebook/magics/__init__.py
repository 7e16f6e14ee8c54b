"""IPython integration of trn-notebook: the ``%trn`` magics and the status-bar comm.

``load_ipython_extension`` registers the ``%trn`` / ``%%trn`` magic, tab completion, cell-named
warnings, the one cell-finished event (``session.events``) and the status-bar comm;
``unload_ipython_extension`` undoes all of it. Both are idempotent.
"""

from __future__ import annotations

from IPython.core.interactiveshell import InteractiveShell

from ..facts.status import state_snapshot
from ..session.events import cell_finished
from . import hooks, status_comm
from .trn import TrnMagics

__all__ = ["TrnMagics", "load_ipython_extension", "unload_ipython_extension"]


def _payload() -> dict:
    return state_snapshot()[0]


def load_ipython_extension(shell: InteractiveShell) -> None:
    """Register ``%trn``/``%%trn`` and its hooks on ``shell`` (calling it again is harmless)."""
    unload_ipython_extension(shell)
    shell.register_magics(TrnMagics)
    hooks.install_completion(shell)
    hooks.install_warning_format(shell)
    cell_finished.install(shell)  # the one post_run_cell hook: every view subscribes to it
    status_comm.register(shell, _payload)  # type: ignore[arg-type]


def unload_ipython_extension(shell: InteractiveShell) -> None:
    """Remove the magic, its hooks and the status comm from ``shell``; harmless when not loaded."""
    manager = shell.magics_manager
    for kind in ("line", "cell"):
        manager.magics[kind].pop("trn", None)
    manager.registry.pop(TrnMagics.__name__, None)
    hooks.remove_completion(shell)
    hooks.remove_warning_format(shell)
    cell_finished.uninstall(shell)
    status_comm.unregister(shell)
