"""Which compiler ``torch.compile(backend="neuron")`` runs: the real TorchNeuron one whenever it is installed.

Dynamo keys backends by name and, when two installed packages declare the same ``torch_dynamo_backends``
entry point, silently takes whichever it finds first. Our ``neuron`` entry point therefore points at
:func:`neuron_entry_point`, which hands every graph to torch-neuronx's own backend when ``torch_neuronx`` is
importable and to the simulator's compiler otherwise; the simulator's compiler is always ``neuron_sim``.
"""

from __future__ import annotations

import importlib.metadata
from types import FrameType
from typing import Any

from .. import state as _state
from ..device.autoload import real_backend_present

OUR_DISTRIBUTION = "trn-notebook"
GROUP = "torch_dynamo_backends"


class RealBackendMissingError(RuntimeError):
    """torch_neuronx is importable but declares no ``neuron`` dynamo backend."""


def _canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def real_dynamo_backend() -> Any | None:
    """TorchNeuron's ``neuron`` compiler function when ``torch_neuronx`` is importable, else None.

    Raises :class:`RealBackendMissingError` when torch_neuronx is importable but no other installed
    distribution declares a ``neuron`` entry point (never falls back to the simulator on hardware).
    """
    if not real_backend_present():
        return None
    for ep in importlib.metadata.entry_points(group=GROUP, name="neuron"):
        dist = getattr(ep, "dist", None)
        if dist is not None and _canonical(dist.metadata["Name"] or "") == OUR_DISTRIBUTION:
            continue
        return ep.load()
    raise RealBackendMissingError(
        "torch_neuronx is installed but no package other than trn-notebook declares the `neuron` "
        f"{GROUP} entry point, so backend='neuron' cannot reach the real compiler. Reinstall torch-neuronx, "
        "or pass backend='neuron_sim' to run the trn_notebook simulator's compiler on purpose."
    )


def neuron_entry_point(gm: Any, example_inputs: list[Any], **kwargs: Any) -> Any:
    """``backend="neuron"``: the real TorchNeuron compiler if installed, else the simulator's compiler.

    Raises :class:`RealBackendMissingError` (see :func:`real_dynamo_backend`) and whatever the chosen
    compiler raises.
    """
    real = real_dynamo_backend()
    if real is not None:
        return real(gm, example_inputs, **kwargs)
    from ..compiler.backend import neuron_backend

    return neuron_backend(gm, example_inputs, **kwargs)


def live_compiler() -> str:
    """``"torch_neuronx"`` or ``"trn_notebook simulator"``: what ``backend="neuron"`` runs in this process."""
    return "torch_neuronx" if real_backend_present() else "trn_notebook simulator"


class DefaultBackendNote(UserWarning):
    """Shown once per process: a default ``torch.compile`` (Inductor) graph on neuron went to our compiler."""


_noted: list[bool] = [False]
_state.register("default_backend_note", _state.Globals(__name__, "_noted"))  # shown again after a reset


def _touches_neuron(gm: Any, example_inputs: Any) -> bool:
    """True when a graph input, parameter, buffer or traced value of ``gm`` lives on ``neuron``."""
    import torch

    def on_neuron(value: Any) -> bool:
        return isinstance(value, torch.Tensor) and value.device.type == "neuron"

    if any(on_neuron(x) for x in example_inputs or ()):
        return True
    if isinstance(gm, torch.nn.Module) and any(on_neuron(t) for t in (*gm.parameters(), *gm.buffers())):
        return True
    graph = getattr(gm, "graph", None)
    for node in graph.nodes if graph is not None else ():
        value = node.meta.get("example_value", node.meta.get("val"))
        if on_neuron(value) or (isinstance(value, (list, tuple)) and any(on_neuron(v) for v in value)):
            return True
    return False


def _note_default_backend(config: dict[str, Any]) -> None:
    if _noted[0]:
        return
    _noted[0] = True
    import warnings

    ignored = f" Inductor's options ({', '.join(sorted(config))}) do not apply." if config else ""
    warnings.warn(
        "torch.compile with the default backend (Inductor) got a graph on the neuron device; Inductor has no "
        f"code generator for neuron, so trn_notebook compiles it with its neuron compiler, exactly as "
        f"torch.compile(model, backend='neuron') does.{ignored} Pass backend='neuron' to say so (this note is "
        "shown once per process).",
        DefaultBackendNote,
        stacklevel=_user_stacklevel(),
    )


def _user_stacklevel() -> int:
    """``warnings.warn``'s stacklevel of the innermost frame outside torch and trn_notebook (the user's call)."""
    import os
    import sys

    import torch

    inside = (os.path.dirname(torch.__file__), os.path.dirname(os.path.dirname(__file__)))
    frame: FrameType | None = sys._getframe(1)
    level = 1  # level 1 is _note_default_backend, the caller of warnings.warn
    while frame is not None and frame.f_code.co_filename.startswith(inside):
        frame, level = frame.f_back, level + 1
    return level if frame is not None else 2


def route_default_compile() -> None:
    """Send default ``torch.compile`` (Inductor) graphs that touch ``neuron`` to :func:`neuron_entry_point`.

    ``torch.compile(model)`` (and ``backend="inductor"``, any ``mode``) hands each captured graph to
    ``torch._TorchCompileInductorWrapper``; for a graph on neuron, Inductor would fail deep in its
    scheduler (no code generator for the device). Graphs on any other device keep Inductor unchanged.
    Idempotent; does nothing when the real TorchNeuron owns the device.
    """
    import torch

    from ..device.registration import is_registered

    wrapper = getattr(torch, "_TorchCompileInductorWrapper", None)
    if wrapper is None or not is_registered() or real_backend_present():
        return
    original = wrapper.__call__
    if getattr(original, "_trn_notebook", False):
        return

    def __call__(self: Any, model_: Any, inputs_: Any, **kwargs: Any) -> Any:
        if _touches_neuron(model_, inputs_):
            _note_default_backend(dict(getattr(self, "config", {}) or {}))
            return neuron_entry_point(model_, inputs_)
        return original(self, model_, inputs_, **kwargs)

    __call__._trn_notebook = True  # type: ignore[attr-defined]
    wrapper.__call__ = __call__
