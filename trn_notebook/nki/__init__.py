"""Custom tile kernels: a pinned subset of NKI (Neuron SDK 2.32, NKI 0.6.0) on a CPU simulator.

``import trn_notebook.nki as nki``; ``nki.language`` (``nl``) and ``nki.isa`` (``nisa``) mirror the
real names; ``docs/nki-subset.md`` lists every supported name and every difference. When the real
``nki`` (or ``neuronxcc.nki``) package is importable, :func:`real_nki` returns it and
``trn_notebook.nki_op`` uses it: ours stands down, as the simulated device does for torch_neuronx.
"""

from . import isa, language
from .bridge import nki_op
from .check import CheckResult, check
from .costmodel import get_kernel_cost_constants, reset_kernel_cost_constants, set_kernel_cost_constants
from .errors import NkiCapacityError, NkiError
from .jit import Kernel, KernelRun, UninitializedOutputWarning, estimate
from .report import KernelReport
from .standdown import real_nki
from .traced import JitKernel, jit, simulate

__all__ = [
    "CheckResult",
    "JitKernel",
    "Kernel",
    "KernelReport",
    "KernelRun",
    "NkiCapacityError",
    "NkiError",
    "UninitializedOutputWarning",
    "check",
    "estimate",
    "get_kernel_cost_constants",
    "isa",
    "jit",
    "language",
    "nki_op",
    "real_nki",
    "reset_kernel_cost_constants",
    "set_kernel_cost_constants",
    "simulate",
]


def _stand_down() -> None:
    """Rebind the public kernel API to the real NKI when it is installed."""
    real = real_nki()
    if real is None:
        return
    import logging

    logging.getLogger("trn_notebook.nki").warning(
        "trn_notebook.nki: the real NKI (%s) is installed, so nki.jit/language/isa are the real ones; "
        "set TRN_NOTEBOOK_FORCE_NKI_SIM=1 to use the simulator instead",
        real.__name__,
    )
    globals().update(jit=real.jit, language=real.language, isa=real.isa, simulate=getattr(real, "simulate", simulate))


_stand_down()
