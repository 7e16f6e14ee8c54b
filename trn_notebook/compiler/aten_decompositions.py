"""PyTorch's decompositions, applied while AOT Autograd traces, so that only Core ATen IR reaches lowering.

The table is torch's own: ``torch._decomp.core_aten_decompositions()`` plus, for a few non-core ops
that table leaves alone (:data:`EXTRA`), the entries of torch's global decomposition table, and for the few
neither table decomposes (:data:`OURS`: ``addbmm``, ``masked_scatter``), a rule of ours in torch's form. Removed
from it is every overload the compiler lowers to one IR op of its own (:func:`kept_lowerings`): a
library kernel of the runtime (softmax and norm backwards, losses, ``roll``, ``tril``) or one
pointwise op (``silu``, ``hardswish``, ``where``), which the schedule models as one kernel and the
fuser treats as one node, where torch's rule would emit a chain of several.

Our own table (:mod:`.decompositions`) then only canonicalises Core ATen ops inside the IR (``view`` →
``reshape``, ``mean`` → ``sum``/``div``, ``alias`` → its input).
"""

from __future__ import annotations

import functools
from typing import Any

import torch

aten = torch.ops.aten

# Non-core ops that core_aten_decompositions() does not decompose but torch's global table does; each
# reached our lowering as "no lowering for" before (transformers' vision models, torch.norm, Swin backward).
EXTRA = (
    aten.linalg_vector_norm,
    aten._unsafe_index_put,
    aten.index_add,
    aten.new_empty_strided,  # DeepSeek-V3's backward (multi-latent attention)
    aten.addmv,  # a native record with no lowering of its own (the compiled OpInfo sweep)
)


def _addbmm(inp: Any, batch1: Any, batch2: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
    """addbmm = beta·input + alpha·Σ_b batch1[b] @ batch2[b] (input ignored when beta == 0, as torch's kernel);
    neither of torch's tables decomposes it."""
    out = aten.sum.dim_IntList(aten.bmm.default(batch1, batch2), [0])
    if alpha != 1:
        out = aten.mul.Tensor(out, alpha)
    if beta == 0:
        return aten.expand.default(out, list(torch.broadcast_shapes(inp.shape, out.shape)))
    return aten.add.Tensor(out, inp if beta == 1 else aten.mul.Tensor(inp, beta))


def _masked_scatter(inp: Any, mask: Any, source: Any) -> Any:
    """masked_scatter: the k-th True of the (broadcast) mask takes source's k-th element, in row-major order:
    where(mask, source.flatten()[cumsum(mask) - 1], input); a static shape, so no data-dependent size."""
    sizes = (*inp.shape, *mask.shape, *source.shape)
    if not all(isinstance(s, int) for s in sizes):  # a data-dependent size (masked_select's backward): declined,
        return NotImplemented  # as torch's own rules decline (a guard on it would abort the autograd engine)
    shape = list(torch.broadcast_shapes(inp.shape, mask.shape))
    full = aten.expand.default(inp, shape)
    if source.numel() == 0:  # no True may take an element: the input as it is
        return aten.clone.default(full)
    flat = aten.reshape.default(aten.expand.default(mask, shape), [-1])
    index = aten.clamp_min.default(aten.sub.Tensor(aten.cumsum.default(flat, 0, dtype=torch.int64), 1), 0)
    taken = aten.gather.default(aten.reshape.default(source, [-1]), 0, index)
    return aten.where.self(aten.expand.default(mask, shape), aten.reshape.default(taken, shape), full)


OURS = ((aten.addbmm.default, _addbmm), (aten.masked_scatter.default, _masked_scatter))  # neither table has them


def _extra() -> dict[Any, Any]:
    from torch._decomp import get_decompositions

    return {**get_decompositions(list(EXTRA)), **dict(OURS)}


def kept_lowerings() -> list[Any]:
    """Overloads torch would decompose that the compiler lowers to one core IR op of its own instead."""
    from torch._decomp import core_aten_decompositions

    from .ops import LOWERINGS, OPS

    table = {**core_aten_decompositions(), **_extra()}
    return sorted((ov for ov in table if ov in LOWERINGS and OPS[LOWERINGS[ov]].core), key=str)


@functools.cache
def aten_decompositions() -> dict[Any, Any]:
    """The decomposition table passed to AOT Autograd (``decompositions=``): torch's, minus our kernels."""
    from torch._decomp import core_aten_decompositions

    table = {**core_aten_decompositions(), **_extra()}
    for ov in kept_lowerings():
        del table[ov]
    return table


def trace(fn: Any, *args: Any) -> torch.fx.GraphModule:
    """``fn`` traced with fake tensors to the ATen graph the compiler lowers (this table applied);
    for tests and tools that lower a function without dynamo."""
    from torch.fx.experimental.proxy_tensor import make_fx

    return make_fx(fn, decomposition_table=aten_decompositions(), tracing_mode="fake")(*args)
