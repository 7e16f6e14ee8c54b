"""Opt-in ``torch_neuronx`` placement aliases, so code written against TorchNeuron runs on the simulator.

``trn_notebook.alias_torch_neuronx()`` makes ``import torch_neuronx`` return a small module with
``get_executed_ops``, ``get_fallback_ops`` and ``clear_op_tracking`` reading the simulator's placement log.
It is opt-in because other libraries probe ``torch_neuronx`` to detect Neuron hardware: the alias is marked
(``__trn_notebook_alias__``), trn_notebook itself does not mistake it for the real package, and it is never
installed when a real ``torch_neuronx`` is importable. (It sits above the public API it aliases, not in the
read layer, which the API reads.)
"""

from __future__ import annotations

import importlib.machinery
import sys
import types

ALIAS_ATTR = "__trn_notebook_alias__"


def alias_torch_neuronx() -> types.ModuleType:
    """Install (idempotently) and return the ``torch_neuronx`` alias module; returns the real one if installed.

    Raises nothing; call :func:`remove_alias` to undo.
    """
    from ..device.autoload import real_backend_present

    existing = sys.modules.get("torch_neuronx")
    if existing is not None:
        return existing
    if real_backend_present():
        import torch_neuronx  # type: ignore[import-not-found]

        return torch_neuronx
    from .. import api

    module = types.ModuleType(
        "torch_neuronx", "trn_notebook's simulator aliases of torch_neuronx's placement functions"
    )
    module.__spec__ = importlib.machinery.ModuleSpec("torch_neuronx", None)
    setattr(module, ALIAS_ATTR, True)
    module.get_executed_ops = api.get_executed_ops  # type: ignore[attr-defined]
    module.get_fallback_ops = api.get_fallback_ops  # type: ignore[attr-defined]
    module.clear_op_tracking = api.clear_op_tracking  # type: ignore[attr-defined]
    sys.modules["torch_neuronx"] = module
    return module


def remove_alias() -> None:
    """Remove the alias installed by :func:`alias_torch_neuronx` (a real torch_neuronx is left alone)."""
    module = sys.modules.get("torch_neuronx")
    if module is not None and getattr(module, ALIAS_ATTR, False):
        del sys.modules["torch_neuronx"]
