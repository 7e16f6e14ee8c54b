"""The user-facing contracts of ``torch.compile(backend="neuron")``, mirroring the real backend.

* ``mode``: only ``"default"``; any other mode warns once per mode and compiles as default.
* ``dynamic=True``: rejected with a clear error that points at shape buckets.
* ``options``: ``model_name`` and ``fallback_execution`` take effect; other keys are accepted and
  reported as "accepted, no effect" in the compile record.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import torch

from .. import state as _state
from .config import get_config

IMPLEMENTED_OPTIONS: dict[str, type] = {"model_name": str, "fallback_execution": bool}
EFFECTIVE = "effective"
NO_EFFECT = "accepted, no effect"
_warned_modes: set[str] = set()
_state.register("mode_warnings", _state.Globals(__name__, "_warned_modes"))  # warn again after a reset


class NeuronCompileError(RuntimeError):
    """A graph failed to compile for neuron (and fallback execution is off)."""


class DynamicShapesError(ValueError):
    """``dynamic=True`` (or symbolic shapes) reached the neuron compiler, which needs static shapes."""


class NeuronCompileFallbackWarning(UserWarning):
    """A graph failed to compile and runs eagerly instead (fallback execution)."""


@dataclass(frozen=True)
class Options:
    """Options in force for one compile."""

    requested: dict[str, Any]
    effective: dict[str, str]
    model_name: str | None
    fallback_execution: bool

    def key_items(self) -> dict[str, Any]:
        """The options that change the compiled artifact (part of the cache key)."""
        return {k: v for k, v in self.requested.items() if self.effective.get(k) == EFFECTIVE and k != "model_name"}


def check_mode(mode: str | None) -> None:
    """Warn once per unsupported mode (``neuron backend does not support mode=…; using default``)."""
    if mode is None or mode == "default":
        return
    if mode not in _warned_modes:
        _warned_modes.add(mode)
        warnings.warn(f"neuron backend does not support mode={mode!r}; using default", UserWarning, stacklevel=4)


def resolve_options(options: dict[str, Any] | None) -> Options:
    """Classify requested options; raises ``TypeError`` for a non-dict or a wrongly typed known key."""
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise TypeError(f"options must be a dict, got {type(options).__name__}")
    effective: dict[str, str] = {}
    for key, value in options.items():
        want = IMPLEMENTED_OPTIONS.get(key)
        if want is None:
            effective[key] = NO_EFFECT
            continue
        if not isinstance(value, want):
            raise TypeError(f"options[{key!r}] must be {want.__name__}, got {value!r}")
        effective[key] = EFFECTIVE
    fallback = options.get("fallback_execution")
    if fallback is None:
        fallback = not get_config().disable_fallback_execution
    return Options(dict(options), effective, options.get("model_name"), bool(fallback))


def dynamic_error() -> DynamicShapesError:
    """The error for ``dynamic=True``, with the way out."""
    return DynamicShapesError(
        "the neuron backend compiles static shapes only: dynamic=True is not supported. "
        "Pad variable dimensions to a few sizes instead, e.g. "
        "trn_notebook.bucketed(model, dims={'input_ids': 1}, policy='pow2:128-2048'), "
        "or leave dynamic unset and accept one compile per new shape."
    )


def check_static(example_inputs: list[Any]) -> None:
    """Raise :class:`DynamicShapesError` if any example input has a symbolic size."""
    for x in example_inputs:
        if isinstance(x, torch.SymInt | torch.SymFloat):
            raise dynamic_error()
        if isinstance(x, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in x.shape):
            raise dynamic_error()


def runs_on_device(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> bool:
    """Whether a dynamo graph runs on neuron: a device input, or a value it makes there (``torch.ones(3,
    device="neuron")`` in a graph without tensor inputs, whose result must then be a neuron tensor). Never raises."""
    made = torch.utils._pytree.tree_leaves([n.meta.get("example_value") for n in gm.graph.nodes])
    return any(isinstance(x, torch.Tensor) and x.device.type not in ("cpu", "meta") for x in (*example_inputs, *made))
