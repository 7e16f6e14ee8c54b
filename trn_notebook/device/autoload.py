"""``torch.backends`` entry point: ``import torch`` alone makes the simulated ``neuron`` device available.

PyTorch calls :func:`autoload` at the end of ``import torch`` unless
``TORCH_DEVICE_BACKEND_AUTOLOAD=0``. The simulator stands down when a real ``torch_neuronx`` is
importable (the real backend owns the ``neuron`` name then).
"""

from __future__ import annotations

import importlib.util
import logging
import sys

from .. import envvars
from .. import state as _state
from ..envvars import torch_is_importing

log = logging.getLogger("trn_notebook.device")


def real_backend_present() -> bool:
    """True when the real TorchNeuron package (``torch_neuronx``) is importable (not trn_notebook's alias of it)."""
    if getattr(sys.modules.get("torch_neuronx"), "__trn_notebook_alias__", False):
        return False
    return importlib.util.find_spec("torch_neuronx") is not None


_said_stand_down = False
_state.register("autoload", _state.Globals(__name__, "_said_stand_down"), reset=False)  # once per process


def autoload(explicit: bool = False) -> bool:
    """Register the simulated device unless a real ``torch_neuronx`` is installed; returns True if registered.

    ``explicit`` is True for ``import trn_notebook`` (then ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` does not apply).
    Through ``import torch`` it never raises: a failure is a warning and the device is not registered.
    """
    global _said_stand_down
    if not explicit and not envvars.flag("TORCH_DEVICE_BACKEND_AUTOLOAD"):
        return False
    if explicit:
        _say_if_torch_skipped_us()
    if real_backend_present():
        if not _said_stand_down:
            _said_stand_down = True
            log.warning(
                "trn_notebook: torch_neuronx is installed, so the real neuron backend is used; "
                "the trn_notebook simulator stands down (call trn_notebook.device.register() to force it)"
            )
        return False
    package = sys.modules.get(__package__)
    if package is not None and not hasattr(package, "register"):
        return False  # `import trn_notebook` is importing torch: the package registers the device right after
    from . import register
    from .registration import NeuronOwnedElsewhere

    if explicit and not torch_is_importing():
        try:
            register()
        except NeuronOwnedElsewhere as exc:  # the other backend is active; trn_notebook's other tools still work
            _warn_safely(f"trn_notebook: {exc}")
            return False
        return True
    try:
        register()
    except Exception as exc:  # never break `import torch` for every program in this environment
        _warn_safely(
            f"trn_notebook: the simulated neuron device could not be registered ({type(exc).__name__}: {exc}); "
            "`import torch` continues without it. `import trn_notebook` shows the full error."
        )
        return False
    return True


def _say_if_torch_skipped_us() -> None:
    """Warn when ``TORCH_DEVICE_BACKEND_AUTOLOAD`` is malformed: PyTorch read it as off (only ``1`` is on)."""
    raw = envvars.text("TORCH_DEVICE_BACKEND_AUTOLOAD")
    if raw is not None and raw not in ("0", "1"):
        envvars.warn_bad(
            "TORCH_DEVICE_BACKEND_AUTOLOAD",
            raw,
            "1 (on) or 0 (off)",
            consequence="PyTorch read it as 0, so `import torch` alone does not register neuron; "
            "`import trn_notebook` registered it.",
        )


def _warn_safely(message: str) -> None:
    """A RuntimeWarning, or a log line when warnings are errors (``-W error``, pytest's ``filterwarnings=error``)."""
    import warnings

    try:
        warnings.warn(message, RuntimeWarning, stacklevel=3)
    except Warning:
        log.warning("%s", message)
