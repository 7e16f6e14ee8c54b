"""Which compiler ``torch.compile(backend="neuron")`` runs: the real TorchNeuron one whenever it is installed.

Dynamo keys backends by name and, when two installed packages declare the same ``torch_dynamo_backends``
entry point, silently takes whichever it finds first. Our ``neuron`` entry point therefore points at
:func:`neuron_entry_point`, which hands every graph to torch-neuronx's own backend when ``torch_neuronx`` is
importable and to the simulator's compiler otherwise; the simulator's compiler is always ``neuron_sim``.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

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
