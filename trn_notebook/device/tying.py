"""Module conversions to and from ``neuron`` keep Parameter identity, so tied weights stay tied.

``nn.Module._apply`` (behind ``.to``, ``.cpu``, ``.float`` ...) changes a Parameter in place with
``param.data = new`` only when ``torch._has_compatible_shallow_copy_type(old, new)``; that C++ check
lists the dense in-tree backends (CPU, CUDA, MPS, ...) and not PrivateUse1. For ``cpu <-> neuron`` it
is False, so PyTorch builds a new Parameter per module: a weight shared by two modules (GPT-2's
``lm_head.weight is wte.weight``) becomes two, an optimizer built before ``.to`` holds stale tensors.

The fix is scoped to exactly that case. :func:`install` wraps ``nn.Module._apply``; after a module's
own conversion, each Parameter that PyTorch replaced *only* because one side was ``neuron`` (both
sides dense CPU/neuron tensors, no ``overwrite_module_params_on_conversion``) is swapped back into
the original Python object with ``torch.utils.swap_tensors``: the object keeps its identity and now
holds the converted data, as ``param.data = new`` would on CUDA. A second module holding the same
(already converted) Parameter then takes PyTorch's own in-place path, so ties survive as on CPU.
Conversions that do not touch ``neuron`` (and meta -> anything, which also unties on CPU) are left
exactly as PyTorch does them. ``torch.__future__.set_swap_module_params_on_conversion`` was not used:
it is global and changes CPU behaviour (every conversion swaps, ``load_state_dict`` assigns).
"""

from __future__ import annotations

import threading
import warnings
from typing import Any

import torch
from torch import nn

from .. import state as _state

_DENSE = ("cpu", "neuron")
_local = threading.local()
_original_apply: Any = None
# the patched nn.Module._apply and its per-thread guard: installed once per process
_state.register("weight_tying", _state.Globals(__name__, "_local", "_original_apply"), reset=False)


def _needs_restore(old: torch.Tensor, new: torch.Tensor) -> bool:
    """True when PyTorch replaced ``old`` only because ``neuron`` is not in its dense-backend list."""
    if new is old or type(old) is not nn.Parameter or type(new) is not nn.Parameter:
        return False
    dev_old, dev_new = old.device.type, new.device.type
    if "neuron" not in (dev_old, dev_new) or dev_old not in _DENSE or dev_new not in _DENSE:
        return False
    if torch.__future__.get_overwrite_module_params_on_conversion():
        return False  # the user asked for new Parameters: CPU makes them too
    return not torch._has_compatible_shallow_copy_type(old, new)


def _apply(self: nn.Module, fn: Any, recurse: bool = True) -> nn.Module:
    depth = getattr(_local, "depth", 0)
    if depth == 0:
        _local.memo = {}
    try:
        return _apply_keeping_ties(self, fn, recurse, depth, _local.memo)
    finally:
        if depth == 0:  # the outermost conversion is over: hold no tensor past it (nor an id Python may reuse)
            _local.memo = {}


def _apply_keeping_ties(
    self: nn.Module, fn: Any, recurse: bool, depth: int, memo: dict[int, nn.Parameter]
) -> nn.Module:
    for key, p in self._parameters.items():  # a tie whose first holder could not be swapped (fallback)
        if p is not None and id(p) in memo:
            self._parameters[key] = memo[id(p)]
    before = dict(self._parameters)
    _local.depth = depth + 1
    try:
        out = _original_apply(self, fn, recurse)
    finally:
        _local.depth = depth
    for key, old in before.items():
        new = self._parameters.get(key)
        if old is None or new is None or not _needs_restore(old, new):
            continue
        try:
            torch.utils.swap_tensors(old, new)  # `old` (the user's object) now holds the converted tensor
        except RuntimeError as exc:  # e.g. a weakref (dynamo guards) or an autograd graph still holds it
            _warn_once(self, key, new, exc)
            memo[id(old)] = new  # later holders of `old` get `new`: the tie survives, identity does not
            continue
        self._parameters[key] = old
    return out


def _warn_once(module: nn.Module, key: str, new: torch.Tensor, exc: Exception) -> None:
    if getattr(_local, "warned", False):
        return
    _local.warned = True
    warnings.warn(
        f"trn_notebook: could not keep Parameter {type(module).__name__}.{key} as the same object while "
        f"moving it to {new.device} ({str(exc).splitlines()[0]}); it was replaced by a new Parameter (modules "
        "sharing it still share the new one). Build optimizers after .to('neuron').",
        stacklevel=4,
    )


def install() -> None:
    """Wrap ``nn.Module._apply`` once (idempotent); conversions not involving ``neuron`` are unchanged."""
    global _original_apply
    if getattr(nn.Module._apply, "_trn_notebook", False):
        return
    _original_apply = nn.Module._apply
    _apply._trn_notebook = True  # type: ignore[attr-defined]
    nn.Module._apply = _apply  # type: ignore[method-assign]
