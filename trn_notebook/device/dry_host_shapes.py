"""Result shapes of the device's CPU kernels where torch's meta kernels (which a dry run's ``FakeTensorMode``
uses) give other ones for a non-CPU device.

The simulated device computes most ops with the CPU kernels on host views of its tensors (:mod:`.dispatch`),
so a real run's results have the CPU kernels' shapes; torch's meta kernels follow CUDA's for any other device.
Where the two differ, a dry run would allocate (and charge) differently; :data:`SPECIAL` maps those ops to
the CPU kernel's shapes. :func:`indices_on_device` lets index ops take CPU index tensors as the device does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from .dry_dispatch import DryMode

aten = torch.ops.aten
_Tensor = torch.Tensor


def _batch_norm_eval(mode: DryMode, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``native_batch_norm`` in eval: the CPU kernel's saved mean and inverse std are empty (0,) tensors; the meta
    kernel gives them the channels' shape (as CUDA does), two more blocks per layer."""
    if args[5]:  # training: the same shapes on both
        return mode._fake(func, args, kwargs)
    with mode.pause():
        out, mean, _ = func(*args, **kwargs)
    mode.tracker.track(out)
    empty = [mode._fake(aten.empty.memory_format, ([0],), {"dtype": mean.dtype, "device": out.device}) for _ in "ab"]
    return out, empty[0], empty[1]


def _batch_norm_backward(mode: DryMode, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``native_batch_norm_backward`` with an output mask: the CPU kernel returns no tensor where the mask is off
    (the gradient of an input that needs none); the meta kernel returns a full-size one."""
    mask = args[9]
    if all(mask):
        return mode._fake(func, args, kwargs)
    with mode.pause():
        outs = func(*args, **kwargs)
    kept = tuple(o if m else None for o, m in zip(outs, mask, strict=True))
    for o in kept:
        if o is not None:
            mode.tracker.track(o)
    return kept


SPECIAL: dict[Any, Callable[..., Any]] = {
    aten.native_batch_norm.default: _batch_norm_eval,
    aten.native_batch_norm_backward.default: _batch_norm_backward,
}


def indices_on_device(mode: DryMode, args: tuple[Any, ...], device: torch.device) -> tuple[Any, ...]:
    """CPU index tensors of an index op, as uncharged shape-only ``device`` tensors of the same geometry.

    The device reads CPU indices on the host as they are (:func:`.dispatch._run`); ``FakeTensorMode`` rejects a
    CPU tensor next to a ``neuron`` one in the ``_out`` and in-place index ops, so their shapes are computed
    with stand-ins.
    """

    def moved(x: Any) -> Any:
        if isinstance(x, _Tensor) and x.device.type == "cpu" and x.dim() > 0:
            with mode.pause():
                return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=device)
        return x

    return tuple(
        [moved(x) for x in a] if isinstance(a, (list, tuple)) and a and isinstance(a[0], _Tensor | None) else moved(a)
        for a in args
    )
