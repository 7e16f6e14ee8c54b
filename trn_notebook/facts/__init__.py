"""The read layer: the facts every view shows, from the simulator or from a real Trainium through TorchNeuron.

:func:`current` returns the live :class:`Backend` (the simulator unless ``torch_neuronx`` is importable);
``api.py``, the session library, the widgets and the report read placement, memory, compile records and
device facts through it, never by counting for themselves. :mod:`.bundle` takes one typed snapshot of every
registered owner (:func:`snapshot`), :mod:`.status` builds the status bar's figures, and :mod:`.dynamo`
decides which compiler ``backend="neuron"`` runs (the same simulator-or-hardware seam). Submodules load
lazily so that the dynamo entry point stays cheap to import. (Named ``trn_notebook.backends`` until issue 29.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import state as _state
from ..device.autoload import real_backend_present
from .base import NA, NOT_MEASURED, Backend, SimulatorOnlyError

if TYPE_CHECKING:
    from .simulator import SimulatorBackend
    from .torchneuron import TorchNeuronBackend

_instances: dict[str, Backend] = {}
_kind: str | None = None  # decided once per process (find_spec costs ~0.2 ms); refresh() decides again
_state.register(
    "backend_choice", _state.Globals(__name__, "_instances", "_kind"), reset=False
)  # refresh() decides again


def current() -> Backend:
    """The live backend: TorchNeuron when ``torch_neuronx`` is importable, else the simulator."""
    global _kind
    if _kind is None:
        _kind = "torchneuron" if real_backend_present() else "simulator"
    backend = _instances.get(_kind)
    if backend is None:
        if _kind == "torchneuron":
            from .torchneuron import TorchNeuronBackend

            backend = TorchNeuronBackend()
        else:
            from .simulator import SimulatorBackend

            backend = SimulatorBackend()
        _instances[_kind] = backend
    return backend


def refresh() -> Backend:
    """Decide again which backend is live (after installing torch-neuronx into a running process)."""
    global _kind
    _kind = None
    return current()


def describe() -> str:
    """One line for ``%trn device``: which backend is live and what ``backend="neuron"`` compiles with."""
    backend = current()
    compiler = "torch_neuronx's compiler" if not backend.is_simulator else "the simulator's compiler"
    return f"live backend: {backend.name}; torch.compile(backend='neuron') uses {compiler} (ours: 'neuron_sim')"


def __getattr__(name: str) -> object:
    if name == "SimulatorBackend":
        from .simulator import SimulatorBackend

        return SimulatorBackend
    if name == "TorchNeuronBackend":
        from .torchneuron import TorchNeuronBackend

        return TorchNeuronBackend
    if name in ("State", "snapshot"):
        from . import bundle

        return getattr(bundle, name)
    raise AttributeError(f"module 'trn_notebook.facts' has no attribute {name!r}")


__all__ = [
    "NA",
    "NOT_MEASURED",
    "Backend",
    "SimulatorBackend",
    "SimulatorOnlyError",
    "State",
    "TorchNeuronBackend",
    "current",
    "describe",
    "refresh",
    "snapshot",
]
