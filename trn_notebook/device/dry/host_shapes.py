"""Result shapes of the device's CPU kernels where torch's meta kernels (which a dry run's ``FakeTensorMode``
uses) give other ones for a non-CPU device.

The simulated device computes most ops with the CPU kernels on host views of its tensors (:mod:`..eager.dispatch`),
so a real run's results have the CPU kernels' shapes; torch's meta kernels follow CUDA's for any other device.
Where the two differ, a dry run would allocate (and charge) differently; :data:`SPECIAL` maps those ops to
the CPU kernel's shapes. :func:`indices_on_device` lets index ops take CPU index tensors as the device does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .shape_mode import ShapeMode

aten = torch.ops.aten
_Tensor = torch.Tensor


def _batch_norm_eval(mode: ShapeMode, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``native_batch_norm`` in eval: the CPU kernel's saved mean and inverse std are empty (0,) tensors; the meta
    kernel gives them the channels' shape (as CUDA does), two more blocks per layer."""
    if args[5]:  # training: the same shapes on both
        return mode._fake(func, args, kwargs)
    with mode.pause():
        out, mean, _ = func(*args, **kwargs)
    mode.tracker.track(out)
    empty = [mode._fake(aten.empty.memory_format, ([0],), {"dtype": mean.dtype, "device": out.device}) for _ in "ab"]
    return out, empty[0], empty[1]


def _batch_norm_backward(mode: ShapeMode, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
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


GROUPED_MM_ASSUMED = (
    "aten::_grouped_mm (MoE experts): balanced routing, assumed: the dry run has no routing, so the per-group "
    "token offsets are unknown; the charge is the op's total shapes (2·M·N·K over all groups, the same for any "
    "split), with each expert's matmul taken as an equal share"
)


def _grouped_mm(mode: ShapeMode, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``_grouped_mm``: the device runs it with the CPU kernel, which takes any float dtype; torch's meta kernel
    follows CUDA's (bf16 only, padded strides). The result: (M, N) for 2-D x 3-D and 3-D x 2-D, (G, M, N) for
    2-D x 2-D (G = the offsets' length) and 3-D x 3-D, contiguous, in ``out_dtype`` or the inputs' dtype."""
    a, b = args[0], args[1]
    offs = args[2] if len(args) > 2 else kwargs.get("offs")
    out_dtype = (args[4] if len(args) > 4 else kwargs.get("out_dtype")) or a.dtype
    if a.dim() == 2 and b.dim() == 2:
        shape = [offs.shape[0] if offs is not None else 1, a.shape[0], b.shape[1]]
    elif a.dim() == 3 and b.dim() == 3:
        shape = [a.shape[0], a.shape[1], b.shape[2]]
    else:
        shape = [a.shape[-2], b.shape[-1]]
    if offs is not None:
        mode.assume(GROUPED_MM_ASSUMED)
    return mode._fake(aten.empty.memory_format, (shape,), {"dtype": out_dtype, "device": a.device})


SPECIAL: dict[Any, Callable[..., Any]] = {
    aten._grouped_mm.default: _grouped_mm,
    aten.native_batch_norm.default: _batch_norm_eval,
    aten.native_batch_norm_backward.default: _batch_norm_backward,
}


def indices_on_device(mode: ShapeMode, args: tuple[Any, ...], device: torch.device) -> tuple[Any, ...]:
    """CPU index tensors of an index op, as uncharged shape-only ``device`` tensors of the same geometry.

    The device reads CPU indices on the host as they are (:func:`..eager.dispatch._run`); ``FakeTensorMode`` rejects a
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
