"""A kernel launch on the CPU simulator, with its modeled time (``nki.jit``'s eager half).

:class:`Kernel` runs a kernel function on the simulator; ``@nki.jit`` (:mod:`.traced`) wraps a
function in its subclass, which under ``torch.compile`` becomes one custom-op call instead.

A kernel takes HBM tensors (torch CPU tensors, NumPy arrays, or ``neuron`` tensors through their
host bytes), allocates its outputs with ``nl.ndarray(..., buffer=nl.shared_hbm)`` and returns them.
``kernel[n](...)`` launches ``n`` SPMD programs (``nl.program_id(0)`` tells them apart); each runs
on its own NeuronCore model and they share the kernel's HBM outputs.
"""

from __future__ import annotations

import functools
import itertools
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..device.memory.runtime import get_chip
from .costmodel import core_spec
from .errors import NkiError
from .report import KernelReport, combine
from .simulator import SimContext
from .tensor import ON_CHIP, NkiTensor, Storage, wrap_hbm


class UninitializedOutputWarning(UserWarning):
    """A kernel output still holds the simulator's NaN sentinel in places (a tile never stored)."""


@dataclass
class KernelRun:
    """Outputs of one launch plus its modeled report."""

    outputs: Any
    report: KernelReport


def _to_torch(a: Any, meta: bool) -> tuple[Any, str]:
    """(value for the kernel, kind) where kind is 'torch', 'numpy', 'neuron' or 'other'."""
    if isinstance(a, torch.Tensor):
        kind = "neuron" if a.device.type == "neuron" else "torch"
        if kind == "neuron":
            from ..device.memory.runtime import host_view

            a = host_view(a)
        if meta and a.device.type != "meta":
            a = torch.empty_like(a, device="meta")
        return a, kind
    if type(a).__module__ == "numpy" and hasattr(a, "__array__"):
        t = torch.from_numpy(a)
        return (torch.empty_like(t, device="meta") if meta else t), "numpy"
    return a, "other"


class Kernel:
    """A kernel function wrapped by :func:`jit`; call it like the function, or ``kernel[grid](...)``."""

    def __init__(self, fn: Callable[..., Any], grid: tuple[int, ...] = ()) -> None:
        self.fn = fn
        self.grid = grid
        self.last_report: KernelReport | None = None
        functools.update_wrapper(self, fn)

    @property
    def name(self) -> str:
        return getattr(self.fn, "__name__", "kernel")

    def __getitem__(self, grid: int | tuple[int, ...]) -> Kernel:
        grid = (grid,) if isinstance(grid, int) else tuple(int(g) for g in grid)
        if not grid or any(g < 1 for g in grid):
            raise NkiError(f"launch grid must be positive integers, got {grid}")
        k = type(self)(self.fn, grid)
        k.__dict__["_parent"] = self
        return k

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.run(*args, **kwargs).outputs

    def run(self, *args: Any, chip: str | None = None, meta: bool = False, **kwargs: Any) -> KernelRun:
        """Simulate one launch; returns outputs (same kind as the inputs) and the modeled :class:`KernelReport`.

        Raises :class:`NkiError` (naming the kernel line) when the kernel breaks a hardware rule.
        """
        spec = core_spec(chip or get_chip().name)
        converted = [_to_torch(a, meta) for a in args]
        kinds = {k for _, k in converted}
        hbm_args = [wrap_hbm(v, f"arg{i}") if isinstance(v, torch.Tensor) else v for i, (v, _) in enumerate(converted)]
        shared: list[Storage] = []
        reports: list[KernelReport] = []
        result: Any = None
        grid = self.grid
        for pid in itertools.product(*(range(g) for g in grid)) if grid else [()]:
            ctx = SimContext(spec, meta=meta, program_id=pid, grid=grid, shared=shared)
            with ctx:
                try:
                    out = self.fn(*hbm_args, **kwargs)
                except RecursionError:
                    raise NkiError(
                        f"kernel {self.name} recursed without end (Python's recursion limit was reached while the "
                        "kernel body ran): a kernel may call helper functions, but a call of itself needs a base "
                        "case that stops it; write repeated work as a loop (nl.affine_range / for i in range(n))"
                    ) from None
            result = out if result is None else result
            sched = ctx.scheduler
            reports.append(
                KernelReport(
                    self.name,
                    spec.name,
                    sched.total_s(),
                    dict(sched.busy),
                    dict(sched.counts),
                    sched.flops,
                    sched.dma_bytes,
                    ctx.sbuf_peak,
                    spec.sbuf_partition_bytes,
                    ctx.psum_peak,
                    records=sched.records,
                )
            )
        report = combine(reports)
        self.last_report = report
        parent = self.__dict__.get("_parent")
        if parent is not None:
            parent.last_report = report
        outputs = _outputs(result, kinds, meta, self.name)
        return KernelRun(outputs, report)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _outputs(result: Any, kinds: set[str], meta: bool, name: str) -> Any:
    if result is None:
        return None
    single = isinstance(result, NkiTensor)
    if not single and not isinstance(result, tuple | list):
        raise NkiError(
            f"kernel {name} returned {type(result).__name__} {_short(result)}; a kernel returns an HBM tensor "
            "(nl.ndarray(shape, dtype, buffer=nl.shared_hbm), filled with nl.store), a tuple of them, or nothing"
        )
    items = [result] if single else list(result)
    outs = []
    for o in items:
        if not isinstance(o, NkiTensor):
            raise NkiError(
                f"kernel {name} returned {type(o).__name__}; kernels return HBM tensors (nl.ndarray(..., buffer=nl.shared_hbm))"
            )
        if o.buffer in ON_CHIP:
            raise NkiError(
                f"kernel {name} returned an on-chip tile {o!r}; allocate the output with "
                "nl.ndarray(shape, dtype, buffer=nl.shared_hbm) and nl.store the tile into it"
            )
        t: Any = o.data
        if not meta and t.dtype.is_floating_point and o.storage.name == "" and bool(torch.isnan(t).any()):
            frac = float(torch.isnan(t).float().mean())
            warnings.warn(
                f"kernel {name}: {frac:.1%} of an output's elements are NaN. The simulator fills memory the kernel "
                "never wrote with NaN: check that every output tile is stored.",
                UninitializedOutputWarning,
                stacklevel=4,
            )
        if "neuron" in kinds and not meta:
            from ..device.memory.runtime import wrap

            t = wrap(t)
        elif "numpy" in kinds and "torch" not in kinds and not meta:
            t = t.numpy()
        outs.append(t)
    return outs[0] if single else tuple(outs)


def as_kernel(kernel: Kernel | Callable[..., Any]) -> Kernel:
    """``kernel`` as a :class:`Kernel` (a function is wrapped; a kernel is returned as it is)."""
    return kernel if isinstance(kernel, Kernel) else Kernel(kernel)


def estimate(kernel: Kernel | Callable[..., Any], *args: Any, chip: str | None = None, **kwargs: Any) -> KernelReport:
    """Model a launch from shapes only (meta tensors): every rule is checked, nothing is computed.

    Arguments may be tensors (their shape and dtype are used) or ``(shape, dtype)`` pairs.
    """
    k = as_kernel(kernel)
    metas = [
        torch.empty(a[0], dtype=a[1], device="meta")
        if isinstance(a, tuple) and len(a) == 2 and isinstance(a[1], torch.dtype)
        else a
        for a in args
    ]
    return k.run(*metas, chip=chip, meta=True, **kwargs).report
