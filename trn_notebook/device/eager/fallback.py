"""The charge of one CPU fallback, in one place: eager's boxed fallback (:mod:`.dispatch`) and a compiled
graph's host calls (``compiler/host_call.py``) both call :func:`charge_fallback`.

A fallback makes the host wait for the device (a sync point), copies its inputs to the host, computes there
and copies the results back. Its modeled cost is the copies both ways plus the modeled host compute
(:func:`~..costmodel.fallback_seconds`; never a measured time, which includes first-call warm-up and depends on
the laptop); the measured wall is kept beside it. The op is warned about once per op (not random-number ops,
which run on the host by the simulator's design and are explained on the device card instead).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import torch

from ... import state as _state
from .. import costmodel
from ..clocks import clocks
from ..ops.op_table import RNG as EXPECTED_ON_HOST  # by design on the host: explained once, not warned
from ..placement import placement_log
from ..source_lines import user_frame


class NeuronFallbackWarning(UserWarning):
    """Emitted once per op that falls back to the CPU."""


_warned: set[str] = set()
_state.register("fallback_warnings", _state.Globals(__name__, "_warned"))  # fallbacks warn again after a reset


def warn_once(name: str, reason: str = "", quiet: bool = False) -> None:
    """Warn ``Operator 'aten::<name>' fell back to CPU`` the first time op ``name`` falls back (at the user's
    line); ``quiet`` (printing) or a random-number op (``reason`` is the registry's RNG reason) only marks it."""
    if name in _warned:
        return
    _warned.add(name)
    if not quiet and reason != EXPECTED_ON_HOST:
        where = user_frame() or ("<unknown>", 0)
        warnings.warn_explicit(
            f"Operator 'aten::{name}' fell back to CPU", NeuronFallbackWarning, where[0], where[1], "trn_notebook"
        )


def charge_fallback(
    name: str,
    inputs: Sequence[torch.Tensor],
    outputs: Sequence[torch.Tensor],
    wall_s: float,
    sync_reason: str = "",
) -> float:
    """Charge one CPU fallback of base op ``name``: a sync, then host work of the modeled copies both ways plus
    the modeled host compute, and one ``cpu_fallback`` call in the placement log (bytes d2h = ``inputs``, h2d =
    ``outputs``). ``inputs``/``outputs`` may be meta tensors (only shapes, dtypes and sizes are read); ``wall_s``
    is the measured host wall of the call. Returns the modeled seconds charged. Raises nothing."""
    in_bytes = 0
    for t in inputs:
        in_bytes += t.nbytes
    out_bytes = 0
    for o in outputs:
        out_bytes += o.nbytes
    clocks.sync(sync_reason or f"fallback aten::{name}")
    moved = costmodel.transfer_seconds(in_bytes) + costmodel.transfer_seconds(out_bytes)
    modeled = costmodel.fallback_seconds(name, list(inputs), list(outputs))
    clocks.host_work(name, modeled, wall_s, {"fallback": True, "copy_s": moved, "h2d": out_bytes, "d2h": in_bytes})
    placement_log.record(name, "cpu_fallback", wall_s, modeled, h2d=out_bytes, d2h=in_bytes)
    return modeled


def placed_category(info: Any, category: str, dtype: torch.dtype | None, native: Any, cfg: Any, formatting: int) -> str:
    """Where an op runs once its dtype is known: a native op in a dtype it has no kernel for falls back to the CPU.

    One rule for eager and dry runs. Raises ``RuntimeError`` when the environment forbids that fallback
    (``TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1``) or strict mode refuses any CPU fallback (printing a
    tensor, ``formatting``, is never refused).
    """
    if category == "native" and dtype is not None and dtype not in native:
        if cfg.fallback_only_for_unimplemented:
            # RuntimeError, not TypeError: torch turns a TypeError inside `a + b` into "unsupported operand".
            raise RuntimeError(
                f"aten::{info.name} has a native kernel but not for {dtype}; "
                "TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1 forbids the CPU fallback. "
                "Cast to float32/bfloat16 or unset the variable."
            )
        category = "cpu_fallback"
    if category == "cpu_fallback" and cfg.strict and not formatting:
        raise RuntimeError(
            f"aten::{info.name} would fall back to CPU ({info.reason or 'no native kernel'}) and strict "
            "mode is on; run it on the CPU explicitly or turn strict mode off (%%trn eager without --strict)"
        )
    return category
