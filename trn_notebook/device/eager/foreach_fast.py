"""The steady-state path of a foreach overload (torch.optim's foreach Adam/AdamW/SGD, issue 33 item 2).

An optimizer step calls a handful of foreach ops, each over lists of same-dtype neuron tensors and Python
scalars. :func:`~trn_notebook.device.eager.dispatch.run_op` handles every argument shape an op can take (CPU
tensors, kwargs tensors, out= resizes, unwrapped scalars), at ~2.5 µs of Python per tensor. Here only that
common shape is taken: one pass per list (placement checks and cached host views), no geometry check after
an in-place foreach (an elementwise op over its lists never resizes or restrides them), and the outputs of a
functional foreach (fresh tensors by schema) wrapped without searching the inputs. Anything else returns
``None`` and the caller runs the general path. The charge is the general path's own
(:func:`~trn_notebook.device.eager.dispatch._account_native` with the op's arguments): the placement log, the
clocks and every modeled figure are the same, only the wall time changes.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from ..memory.runtime import cached_host_view, check_representable, state, wrap
from ..ops.policy import REJECTED_DTYPES
from .dispatch import _account_native, _OpInfo

_perf = time.perf_counter
_Tensor = torch.Tensor
_NUMBERS = (int, float, bool, complex)
NOT_TAKEN = object()  # the general path must run this call


def fresh_outputs(op: torch._ops.OpOverload) -> bool:
    """Whether ``op`` (a foreach overload) returns only new tensors (no output aliases an input)."""
    return all(r.alias_info is None for r in op._schema.returns)


def run_foreach(info: _OpInfo, fresh: bool, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run native foreach ``info`` over lists of neuron tensors of one native dtype, or return
    :data:`NOT_TAKEN` (any other argument shape: the caller runs the general path). Raises what the CPU
    kernel raises (mismatched list lengths, shapes)."""
    if info.category != "native" or not state.accounting:
        return NOT_TAKEN
    for v in kwargs.values():
        if type(v) not in _NUMBERS:
            return NOT_TAKEN
    t0 = _perf()
    dtype = None
    hargs: list[Any] = []
    view = cached_host_view
    for a in args:
        if type(a) is list and a and isinstance(a[0], _Tensor):
            if dtype is None:
                dtype = a[0].dtype
                if dtype in REJECTED_DTYPES or dtype not in info.dtypes:
                    return NOT_TAKEN
            for x in a:
                if x.is_cpu or x.dtype is not dtype:
                    return NOT_TAKEN
            hargs.append([view(x) for x in a])
        elif isinstance(a, _Tensor) or (isinstance(a, list | tuple) and a and not isinstance(a[0], _NUMBERS)):
            return NOT_TAKEN  # a tensor argument (a CPU step count, a scalar tensor) or a list of tensors
        else:
            hargs.append(a)
    if dtype is None:
        return NOT_TAKEN
    out = info.call(*hargs, **kwargs)
    if out is None:
        result: Any = None
    elif fresh and type(out) is list:
        result = []
        for o in out:
            check_representable(o)
            result.append(wrap(o, True))
    else:
        return _general_outputs(info, args, hargs, out, dtype, t0)
    _account_native(info, result, [], 0, dtype, _perf() - t0, args)
    return result


def _general_outputs(
    info: _OpInfo, args: tuple[Any, ...], hargs: list[Any], out: Any, dtype: torch.dtype, t0: float
) -> Any:
    """An output that may alias the inputs: mapped back as the general path maps it."""
    from .dispatch import _to_device

    pairs = [(h, n) for hl, nl in zip(hargs, args) if type(nl) is list for h, n in zip(hl, nl)]
    result = _to_device(out, pairs)
    _account_native(info, result, pairs, 0, dtype, _perf() - t0, args)
    return result
