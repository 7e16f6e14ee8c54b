"""Run a model once and keep every module's output: forward hooks, copies of the model, source lines.

A module's output is its first floating-point tensor (HF modules return tuples or ``ModelOutput``s);
a module called more than once gets one capture per call (``name``, ``name#2`` …). Captures are
float32 CPU copies, so the three runs (CPU FP32, CPU BF16, neuron) compare on one footing.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["Capture", "ModuleCall", "capture", "copy_as", "cpu_copy", "first_tensor", "source_line", "to_device"]


@dataclass
class ModuleCall:
    """One call of one module: its key (``name`` or ``name#k``), class, output and (optionally) inputs."""

    key: str
    name: str
    cls: str
    output: torch.Tensor
    inputs: tuple[tuple[Any, ...], dict[str, Any]] | None = None


@dataclass
class Capture:
    """Every module call of one run, in the order the calls finished, plus the model's output."""

    calls: dict[str, ModuleCall] = field(default_factory=dict)
    output: Any = None


def first_tensor(value: Any) -> torch.Tensor | None:
    """The first floating-point tensor in ``value`` (a tensor, tuple, list, dict or ``ModelOutput``), else None."""
    if isinstance(value, torch.Tensor):
        return value if value.is_floating_point() else None
    if isinstance(value, dict):  # HF ModelOutput is an OrderedDict
        value = list(value.values())
    if isinstance(value, tuple | list):
        for v in value:
            t = first_tensor(v)
            if t is not None:
                return t
    return None


def to_device(value: Any, device: str, dtype: torch.dtype | None = None) -> Any:
    """``value`` (tensors inside tuples/lists/dicts) moved to ``device``; floating tensors cast to ``dtype``."""
    if isinstance(value, torch.Tensor):
        v = value.detach().to(device)
        return v.to(dtype) if dtype is not None and v.is_floating_point() else v
    if isinstance(value, tuple | list):
        return type(value)(to_device(v, device, dtype) for v in value)
    if isinstance(value, dict):
        return type(value)({k: to_device(v, device, dtype) for k, v in value.items()})
    return value


def copy_as(model: torch.nn.Module, device: str = "cpu", dtype: torch.dtype | None = None) -> torch.nn.Module:
    """A deep copy of ``model`` whose parameters and buffers are copied once, straight to ``device`` with the
    floating ones cast to ``dtype`` (``copy.deepcopy`` then ``.to()`` would copy every tensor twice); tied
    weights stay tied. The user's model is not changed."""
    memo: dict[int, Any] = {}
    for t in [*model.parameters(), *model.buffers()]:
        if id(t) in memo:
            continue
        cast = dtype if dtype is not None and t.is_floating_point() else t.dtype
        new = t.detach().to(device, cast, copy=True)
        memo[id(t)] = torch.nn.Parameter(new, t.requires_grad) if isinstance(t, torch.nn.Parameter) else new
    return copy.deepcopy(model, memo)


def cpu_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A deep copy of ``model`` on the CPU (device parameters go straight to the host, never copied on the device)."""
    return copy_as(model, "cpu")


def source_line(module: torch.nn.Module) -> str:
    """``file:line`` of the module class's ``forward`` (``"(unknown)"`` when Python cannot say); an
    installed package's file is shown from its package directory (``torch/nn/modules/linear.py:130``)."""
    fn = getattr(type(module), "forward", None)
    try:
        path = inspect.getsourcefile(fn) if fn is not None else None
        line = inspect.getsourcelines(fn)[1] if fn is not None else None
    except (OSError, TypeError):
        return "(unknown)"
    if not path:
        return "(unknown)"
    _, sep, tail = path.rpartition("site-packages/")  # installed packages: the path inside the package
    return f"{tail if sep else path}:{line}"


def capture(
    model: torch.nn.Module,
    run: Callable[[], Any],
    *,
    keep_inputs: bool = False,
) -> Capture:
    """Call ``run()`` (which runs ``model``) with a forward hook on every module; return what they produced.

    ``keep_inputs`` also keeps each call's arguments (references, for replaying one module). The hooks
    are removed afterwards whatever happens; what ``run`` raises propagates.
    """
    result = Capture()
    counts: dict[str, int] = {}
    seen: dict[int, tuple[torch.Tensor, int, torch.Tensor]] = {}  # id(output) -> (output, its version, capture)
    handles = []

    def hook_for(name: str) -> Callable[..., None]:
        def hook(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
            t = first_tensor(out)
            if t is None:
                return
            counts[name] = counts.get(name, 0) + 1
            key = name if counts[name] == 1 else f"{name}#{counts[name]}"
            kept = (args, kwargs) if keep_inputs else None
            # a block returning its last child's output (unchanged since: same version) shares that child's capture
            known = seen.get(id(t))
            if known is None or known[1] != t._version:
                known = seen[id(t)] = (t, t._version, t.detach().to("cpu", torch.float32, copy=True))
            result.calls[key] = ModuleCall(key, name, type(module).__name__, known[2], kept)

        return hook

    try:
        for name, module in model.named_modules():
            handles.append(module.register_forward_hook(hook_for(name), with_kwargs=True))
        with torch.no_grad():
            result.output = run()
    finally:
        for h in handles:
            h.remove()
    return result
