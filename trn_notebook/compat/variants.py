"""Variant checks of one OpInfo sample on the device: ``out=``, in-place, and printing of the results.

These exercise what the boxed fallback must get right beyond values: ``out=`` tensors resized from zero
elements and returned as themselves, in-place ops returning their argument with the new values, and
``repr`` of device results matching CPU's (sync point, float64-free formatting).
"""

from __future__ import annotations

import re
from typing import Any, Literal

import torch


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


def _empty_like_outputs(raw: Any, device: str) -> Any:
    if isinstance(raw, torch.Tensor):
        return torch.empty(0, dtype=raw.dtype, device=device)
    if isinstance(raw, tuple | list) and raw and all(isinstance(t, torch.Tensor) for t in raw):
        return tuple(torch.empty(0, dtype=t.dtype, device=device) for t in raw)
    return None


def _same_objects(result: Any, out: Any) -> bool:
    if isinstance(out, torch.Tensor):
        return result is out
    return len(result) == len(out) and all(r is o for r, o in zip(result, out))


def out_sample(opinfo: Any, sample: Any, on_device: Any, compare: Any) -> str | Literal[False] | None:
    """Run the ``out=`` overload into 0-element device tensors; None on a pass, False if not applicable."""
    if not opinfo.supports_out:
        return False
    try:
        raw = opinfo(sample.input, *sample.args, **sample.kwargs)
        cpu_out = _empty_like_outputs(raw, "cpu")
        if cpu_out is None:
            return False
        opinfo(sample.input, *sample.args, **sample.kwargs, out=cpu_out)
    except Exception:
        return False  # no out= form for this sample on the CPU either
    raw = cpu_out
    out = _empty_like_outputs(raw, "neuron")
    try:
        result = opinfo(on_device.input, *on_device.args, **on_device.kwargs, out=out)
    except Exception as exc:
        return "out=: " + _short(exc)
    if result is not None and not _same_objects(result, out):  # (some out= overloads return nothing)
        return "out=: the result is not the out tensor"
    error = compare(
        out if isinstance(out, torch.Tensor) else list(out), raw if isinstance(raw, torch.Tensor) else list(raw)
    )
    return None if error is None else "out=: " + error


def inplace_sample(opinfo: Any, sample: Any, on_device: Any, compare: Any) -> str | Literal[False] | None:
    """Run the in-place variant on a copy of the input; it must return its argument holding CPU's values."""
    inplace = opinfo.inplace_variant
    if inplace is None or not isinstance(sample.input, torch.Tensor):
        return False
    cpu_in = sample.input.detach().clone()
    try:
        inplace(cpu_in, *sample.args, **sample.kwargs)
    except Exception:
        return False
    dev_in = on_device.input.detach().clone()
    try:
        result = inplace(dev_in, *on_device.args, **on_device.kwargs)
    except Exception as exc:
        return "in-place: " + _short(exc)
    if result is not dev_in:
        return "in-place: the result is not the input tensor"
    error = compare(dev_in, cpu_in)
    return None if error is None else "in-place: " + error


def print_check(actual: Any) -> str | None:
    """``repr`` of each device result works and reads as CPU's repr of the same values (device suffix aside)."""
    tensors = [actual] if isinstance(actual, torch.Tensor) else []
    if isinstance(actual, tuple | list):
        tensors = [t for t in actual if isinstance(t, torch.Tensor)]
    for t in tensors:
        if t.device.type != "neuron" or t.layout != torch.strided:
            continue
        try:
            text = repr(t)
        except Exception as exc:
            return "print: " + _short(exc)
        got = re.sub(r",\s*device='neuron:0'", "", text)
        want = repr(t.detach().cpu())
        if re.sub(r"\s+", "", got) != re.sub(r"\s+", "", want):  # the suffix may move a line break
            return f"print: {got[:80]!r} != {want[:80]!r}"
    return None
