"""``torch.accelerator`` and ``torch.accelerator.memory`` answer for ``neuron``: every public function of both.

PyTorch implements both namespaces in C++ against a ``c10::DeviceAllocator`` and a C++ device guard, which a
backend written in Python cannot register. On ``neuron`` their C++ path hits an internal assert
(``memory_allocated``, ``memory_stats``, ``reset_accumulated_memory_stats`` …), dereferences a host allocator
that does not exist (``empty_host_cache``: a segmentation fault), or silently ignores the call
(``set_device_index(1)``) — in every program of the environment, since ``import torch`` alone registers
``neuron`` through the ``torch.backends`` entry point and makes it the current accelerator.

Every public function of both namespaces reaches C++ through a ``torch._C._accelerator_*`` binding that it
looks up when it is called, so this module replaces those bindings (:data:`ROUTES`), not the Python
functions: a function imported before, an alias, or a function a new torch adds over the same bindings,
all take the route. While ``neuron`` is the current accelerator a route calls the simulator (the memory
figures of :mod:`.module`: the device's allocator, or the dry one inside a dry run); for any other
accelerator the original binding runs.

Why not PyTorch's own mechanism: ``torch_openreg`` registers a C++ ``c10::DeviceAllocator`` and device
guard, which needs a C++ compiler and torch's headers at install time; the README's two commands install
wheels only, and a compiled module would have to be rebuilt for each torch. The bindings are the narrowest
place a Python backend can hold.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import torch

from .. import state as _state
from . import module

NEURON = "neuron"


def _index(device_index: Any) -> int:
    """The device index a binding was given (-1 or None: the current device); refused beyond core 0."""
    if device_index is None or (isinstance(device_index, int) and device_index < 0):
        return module.current_device()
    return module._check_index(device_index if isinstance(device_index, int) else torch.device(device_index).index or 0)


def _nested(flat: dict[str, Any]) -> dict[str, Any]:
    """``{"a.b.c": v}`` as ``{"a": {"b": {"c": v}}}`` (the C++ binding's shape, which PyTorch flattens back)."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        *parents, leaf = key.split(".")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return out


def _device_stats(device_index: Any) -> dict[str, Any]:
    _index(device_index)
    return _nested(OrderedDict(sorted(module.memory_stats().items())))


def _memory_info(device_index: Any) -> tuple[int, int]:
    _index(device_index)
    stats = module.memory_stats()
    return stats["capacity_bytes"] - stats["reserved_bytes.all.current"], stats["capacity_bytes"]


def _reset_peak(device_index: Any) -> None:
    _index(device_index)
    module.reset_peak_memory_stats()


def _reset_accumulated(device_index: Any) -> None:
    _index(device_index)
    module.reset_accumulated_memory_stats()


def _set_device_index(device_index: Any) -> None:
    if device_index is not None and device_index >= 0:
        module.set_device(device_index)


def _synchronize(device_index: Any) -> None:
    _index(device_index)
    module.synchronize()


def _device_capability(device_index: Any) -> dict[str, Any]:
    """``supported_dtypes``: every dtype a neuron tensor can hold — all of PyTorch's but the 64-bit floating
    ones the device refuses (``registry.REJECTED_DTYPES``), unless ``TRN_NOTEBOOK_ALLOW_FLOAT64`` is set."""
    from .config import get_config
    from .ops.registry import REJECTED_DTYPES

    _index(device_index)
    every = {d for d in vars(torch).values() if isinstance(d, torch.dtype)}
    refused = set() if get_config().allow_float64 else set(REJECTED_DTYPES)
    return {"supported_dtypes": every - refused}


def _empty_host_cache() -> None:
    """The simulator keeps no pinned host blocks: nothing to release."""


ROUTES: dict[str, Callable[..., Any]] = {
    "_accelerator_isAllocatorInitialized": lambda: True,
    "_accelerator_emptyCache": module.empty_cache,
    "_accelerator_emptyHostCache": _empty_host_cache,
    "_accelerator_getDeviceStats": _device_stats,
    "_accelerator_getMemoryInfo": _memory_info,
    "_accelerator_resetPeakStats": _reset_peak,
    "_accelerator_resetAccumulatedStats": _reset_accumulated,
    "_accelerator_setDeviceIndex": _set_device_index,
    "_accelerator_synchronizeDevice": _synchronize,
    "_accelerator_getDeviceCapability": _device_capability,
}
"""The ``torch._C`` bindings a Python backend cannot serve, and what answers for ``neuron`` instead."""

_originals: dict[str, Callable[..., Any]] = {}
_state.register("accelerator_routes", _state.Globals(__name__, "_originals"), reset=False)  # PyTorch's bindings


def _on_neuron(get_accelerator: Callable[[], Any]) -> bool:
    current = get_accelerator()
    return current is not None and current.type == NEURON


def _route(name: str, original: Callable[..., Any], neuron_fn: Callable[..., Any]) -> Callable[..., Any]:
    get_accelerator = torch._C._accelerator_getAccelerator

    def routed(*args: Any) -> Any:
        return neuron_fn(*args) if _on_neuron(get_accelerator) else original(*args)

    routed.__name__ = routed.__qualname__ = name
    routed.__doc__ = f"{name}, answered by trn_notebook's simulator while neuron is the accelerator"
    routed._neuron_routed = True  # type: ignore[attr-defined]
    return routed


def install() -> list[str]:
    """Replace the bindings of :data:`ROUTES` that this torch has (idempotent); returns their names."""
    done = []
    for name, neuron_fn in ROUTES.items():
        original = getattr(torch._C, name, None)
        if original is None:
            continue
        if not getattr(original, "_neuron_routed", False):
            _originals[name] = original
            setattr(torch._C, name, _route(name, original, neuron_fn))
        done.append(name)
    return done


def uninstall() -> None:
    """Put PyTorch's bindings back."""
    for name, original in _originals.items():
        setattr(torch._C, name, original)
    _originals.clear()
