"""The public entry points: :func:`compatibility_table` (``%trn ops --table`` calls it), :func:`sweep` and
:func:`compiled_sweep` (``python -m trn_notebook.compat [--compiled]``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

    from .compiled import CompiledResult
    from .sweep import OpResult

# A representative subset for --quick: one or two ops per family the device handles differently.
QUICK_OPS = (
    "add,mul,div.no_rounding_mode,sum,mean,amax,softmax,log_softmax,nn.functional.gelu,nn.functional.relu,"
    "matmul,mm,addmm,bmm,addr,nn.functional.linear,nn.functional.conv2d,nn.functional.layer_norm,"
    "nn.functional.group_norm,nn.functional.embedding,nn.functional.cross_entropy,nn.functional.max_pool2d,"
    "index_select,index_put,gather,scatter,masked_fill,where,cat,stack,clone,to,eye,arange,zeros_like,"
    "logical_not,isfinite,take_along_dim,copysign,sgn,fft.ifft,sort,topk,cumsum,nonzero,transpose,as_strided,"
    "tensor_split,linalg.svd,flip,roll,tril,clamp"
)

# The compiled sweep's --quick subset (CI): one op per way an op reaches the compiled graph: a lowering, a host
# call (linear algebra with its effectful check, FFT, a cumulative op), a pointwise op with no record, a refusal.
COMPILED_QUICK_OPS = "add,linalg.inv,fft.rfft,special.i0e,cummax,nonzero"


def sweep(ops: str | None = None, quick: bool = False, isolated: bool = True) -> list[OpResult]:
    """Run the sweep over OpInfo entries matching ``ops`` (globs, comma-separated; ``--quick``: a subset).

    ``isolated`` runs it in worker subprocesses (crash-safe, and the session's placement log stays clean).
    Raises ``ValueError`` if ``ops`` matches no OpInfo entry, :class:`~trn_notebook.extras.MissingExtra` (before
    any work) if ``expecttest``, which PyTorch's OpInfo database imports, is not installed.
    """
    from trn_notebook.extras import require

    require("expecttest", "the OpInfo sweep (PyTorch's OpInfo database imports it)")
    from .isolate import run_isolated
    from .sweep import run_op, select_ops

    names = select_ops(ops if ops else (QUICK_OPS if quick else None))
    if not names:
        raise ValueError(f"no OpInfo entry matches {ops!r}; try a glob such as 'nn.functional.*' or 'add,mul'")
    if isolated:
        return run_isolated(names, quick=quick)
    return [run_op(n, quick=quick) for n in names]


def compiled_sweep(
    ops: str | None = None, quick: bool = False, every: int = 1, isolated: bool = True
) -> list[CompiledResult]:
    """The compiled sweep (:mod:`.compiled`) over OpInfo entries matching ``ops`` (every ``every``-th of them):
    each eager-passing float32 sample under ``torch.compile(backend="neuron", fullgraph=True)`` against CPU;
    ``quick`` with no ``ops``: :data:`COMPILED_QUICK_OPS`, one sample each.

    Raises ``ValueError`` if nothing is selected, :class:`~trn_notebook.extras.MissingExtra` (before any
    work) if ``expecttest`` is not installed.
    """
    from trn_notebook.extras import require

    require("expecttest", "the OpInfo sweep (PyTorch's OpInfo database imports it)")
    from .compiled import run_compiled_op
    from .isolate import run_isolated
    from .sweep import select_ops

    names = select_ops(ops if ops else (COMPILED_QUICK_OPS if quick else None))[:: max(1, every)]
    if not names:
        raise ValueError(f"no OpInfo entry matches {ops!r}; try a glob such as 'nn.functional.*' or 'add,mul'")
    if isolated:
        return run_isolated(names, quick=quick, chunk_size=40, compiled=True)
    return [run_compiled_op(n, quick=quick) for n in names]


def compatibility_table(ops: str | None = None, quick: bool = False) -> pd.DataFrame:
    """Per-op compatibility of the neuron device, verified by running PyTorch's OpInfo samples against CPU.

    ``ops``: comma-separated globs over OpInfo names (``"add,nn.functional.*"``; all if None); ``quick``: at
    most two samples per dtype, and a representative op subset when ``ops`` is None. Columns: op, category
    (native / cpu_fallback / unsupported / host_only, from the device policy registry), dtypes_passing,
    dtypes_failing, first_error, forward, backward, forward_samples, backward_samples, aten_ops, crashed.
    Raises ``ValueError`` if ``ops`` matches nothing, :class:`~trn_notebook.extras.MissingExtra` if the
    ``compat`` extra is not installed.
    """
    from .table import results_frame

    return results_frame(sweep(ops, quick))
