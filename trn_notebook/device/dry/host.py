"""Real host values inside a dry run, for a library's own bookkeeping (DDP's bucket-index sync).

A dry run makes every tensor shape-only, host (CPU) tensors included. Some libraries keep bookkeeping
in a small CPU tensor that they copy to the device, run a collective on, copy back and *read*: DDP's
Reducer writes its rebuilt bucket indices that way and broadcasts them from rank 0. Inside
:class:`RealHost` (entered by :meth:`~.dispatch.DryMode.real_host`):

* ops whose tensors are all real host tensors run for real (no device work, nothing charged);
* a real host tensor copied to the device leaves its device copy shape-only and charged as usual,
  but the copy remembers the host values; copied back to a real host tensor, they are restored.
  A collective on the device copy in between does not change them: every dry rank runs rank 0's
  program, so rank 0's values (those of a broadcast from rank 0) are every rank's.
"""

from __future__ import annotations

from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily
from torch.utils._pytree import tree_leaves


class RealHost:
    """A re-entrant context manager; :attr:`depth` > 0 while active (see the module docstring)."""

    def __init__(self) -> None:
        self.depth = 0
        self._shadows: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # id(device copy) -> (it, host values)

    def __enter__(self) -> RealHost:
        self.depth += 1
        return self

    def __exit__(self, *exc: object) -> None:
        self.depth -= 1
        if not self.depth:
            self._shadows.clear()

    @staticmethod
    def all_real(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """True when no tensor among the op's arguments is shape-only (the op can run for real)."""
        return not any(isinstance(t, FakeTensor) for t in tree_leaves((args, kwargs)))

    @staticmethod
    def run(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run ``func`` for real on real host tensors (the fake mode suspended)."""
        with unset_fake_temporarily():
            return func(*args, **kwargs)

    def on_copy(self, src: torch.Tensor, dst: torch.Tensor) -> None:
        """A host -> device copy remembers the host values; a device -> host copy restores them."""
        if dst.device.type != "cpu" and src.device.type == "cpu" and not isinstance(src, FakeTensor):
            with unset_fake_temporarily():
                self._shadows[id(dst)] = (dst, src.detach().clone())
        elif dst.device.type == "cpu" and not isinstance(dst, FakeTensor):
            shadow = self._shadows.get(id(src))
            if shadow is not None and shadow[0] is src:
                with unset_fake_temporarily():
                    dst.copy_(shadow[1])
