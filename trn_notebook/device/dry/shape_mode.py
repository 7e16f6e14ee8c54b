"""What the per-op shape rules of :mod:`.host_shapes` need of a dry run's mode, as a :class:`typing.Protocol`.

:class:`~.dispatch.DryMode` satisfies it; the rules import this leaf instead of the mode, so the mode can import
the rules without an import circle (PyTorch breaks ``fake_tensor`` ↔ ``fake_impls`` the same way, with the leaf
``torch/_subclasses/fake_impls_registry.py``).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol

from .alloc import StorageTracker


class ShapeMode(Protocol):
    """A dry run's dispatch mode as the shape rules use it."""

    tracker: StorageTracker

    def _fake(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run ``func`` shape-only under the fake mode, charging nothing."""
        ...

    def pause(self) -> AbstractContextManager[Any]:
        """A context manager inside which ops are shape-only with nothing charged."""
        ...

    def assume(self, statement: str) -> None:
        """Record an assumption a charge made for want of values."""
        ...
