"""Shapes-only walk of a model: every ATen op's FLOPs and HBM bytes, without weights or data.

The model is built and run inside ``FakeTensorMode`` (tensors have shapes and dtypes, no storage);
a ``TorchDispatchMode`` sees each ATen op and records an :class:`OpCount`. FLOPs come from
``torch.utils.flop_counter``'s registry (PyTorch's own formulas) where it has the op, else one per
output element. Bytes are what a *compiled* graph moves through HBM: matmul-class kernels read their
inputs and write their outputs; everything else (pointwise, reductions, copies, cache updates) is
assumed fused into a neighbouring kernel by the Neuron compiler and moves no HBM bytes of its own.

This is the one function the model-level cost model reads (:func:`walk`); it can be swapped for
``trn_notebook.dryrun()`` when that exists, as long as it returns the same ``OpCount`` list.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry

MATMUL = "matmul"
ATTENTION = "attention"
GROUPED = "grouped_matmul"
OTHER = "other"

_VIEW_TAGS = (torch.Tag.view_copy,)
_ATTENTION_OPS = {
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
    "scaled_dot_product_attention",
}
_MATMUL_OPS = {"mm", "addmm", "bmm", "baddbmm", "convolution", "_convolution", "linear"}


@dataclass(frozen=True)
class OpCount:
    """One ATen op of the walk: its class, FLOPs and HBM bytes (whole model, before any TP split)."""

    name: str
    kind: str  # MATMUL, ATTENTION, GROUPED or OTHER
    flops: float
    bytes: float
    dtype: torch.dtype
    kv_bytes: float = 0.0  # of ``bytes``, the K/V inputs of an attention kernel (KV-cache reads)
    weight_bytes: float = 0.0  # of ``bytes``, the parameters a matmul-class kernel reads
    # matmul-class shape (0: not recorded): ``batch`` independent ``[m, k] @ [k, n]`` products (a grouped
    # matmul: ``batch`` = experts, ``m`` = routed rows, ``k`` x ``n`` = one expert's weight)
    batch: int = 0
    m: int = 0
    k: int = 0
    n: int = 0
    tokens: int = 0  # a grouped matmul: the tokens routed (rows of the last router top-k)
    replicated: bool = False  # its weight is replicated on every TP rank (not sharded)
    # an attention kernel given an explicit mask (a causal LM's prefill: transformers materialises the
    # causal mask), so ``flops`` counts every query x key pair; a causal kernel skips about half
    masked: bool = False


def _tensors(tree: Any) -> list[torch.Tensor]:
    return [t for t in tree_flatten(tree)[0] if isinstance(t, torch.Tensor)]


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class _Recorder(TorchDispatchMode):
    def __init__(
        self, params: set[int], experts_used: Callable[[int, int], float] | None, replicated: set[int] | None = None
    ) -> None:
        super().__init__()
        self.ops: list[OpCount] = []
        self.params = params
        self.experts_used = experts_used
        self.replicated = replicated or set()
        self.tokens = 0  # rows of the last router/top-k seen (the tokens a grouped matmul routes)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = func._overloadpacket.__name__
        if func in (torch.ops.aten.detach.default,) or any(t in func.tags for t in _VIEW_TAGS):
            return out
        ins = _tensors((args, kwargs))
        outs = _tensors(out)
        if not outs:
            return out
        dtype = next((t.dtype for t in ins if t.is_floating_point()), outs[0].dtype)
        packet = func._overloadpacket
        if name == "topk":
            self.tokens = int(ins[0].numel() // ins[0].shape[-1])
        if name in _ATTENTION_OPS:
            q, k, v = ins[0], ins[1], ins[2]
            causal = bool(kwargs.get("is_causal", args[4] if len(args) > 4 else False))
            flops = _attention_flops(q, k, causal)
            kv = float(_nbytes(k) + _nbytes(v))
            nbytes = float(_nbytes(q) + _nbytes(outs[0])) + kv
            mask = kwargs.get(
                "attn_mask", args[3] if name == "scaled_dot_product_attention" and len(args) > 3 else None
            )
            masked = not causal and q.shape[-2] > 1 and isinstance(mask, torch.Tensor)
            self.ops.append(OpCount(name, ATTENTION, flops, nbytes, dtype, kv_bytes=kv, masked=masked))
        elif "grouped_mm" in name:
            self.ops.append(self._grouped(name, ins, outs, dtype))
        elif name in _MATMUL_OPS or packet in flop_registry:
            flops = float(flop_registry[packet](*args, **kwargs, out_val=out)) if packet in flop_registry else 0.0
            storages = {t.untyped_storage()._cdata for t in ins}
            weights = float(sum(_nbytes(t) for t in ins if t.untyped_storage()._cdata in self.params))
            nbytes = float(sum(_nbytes(t) for t in ins) + sum(_nbytes(t) for t in outs))
            batch, m, k, n = _mm_dims(name, ins)
            rep = bool(storages & self.replicated)
            self.ops.append(OpCount(name, MATMUL, flops, nbytes, dtype, 0.0, weights, batch, m, k, n, replicated=rep))
        elif func._schema.is_mutable or func.is_view:
            return out
        else:
            self.ops.append(OpCount(name, OTHER, float(max(t.numel() for t in outs)), 0.0, dtype))
        return out

    def _grouped(self, name: str, ins: list[torch.Tensor], outs: list[torch.Tensor], dtype: torch.dtype) -> OpCount:
        """A grouped (per-expert) matmul ``[rows, d] x [E, d, n]``: FLOPs of the rows routed to experts;
        it reads only the experts that receive rows (``experts_used(E, rows)``, at most all E). How a
        serving stack really dispatches it (all experts, blocks, selective loads) is the reader's
        choice (``fidelity.moe``), from the shape recorded here."""
        x, w = ins[0], ins[1]
        rows = x.shape[0]
        experts = w.shape[0]
        d, n = w.shape[-2], w.shape[-1]
        used = self.experts_used(experts, rows) if self.experts_used else min(experts, rows)
        flops = 2.0 * rows * d * n
        weights = _nbytes(w) * min(used, experts) / experts
        nbytes = float(_nbytes(x) + _nbytes(outs[0])) + weights
        return OpCount(name, GROUPED, flops, nbytes, dtype, 0.0, weights, experts, rows, d, n, self.tokens or rows)


def _mm_dims(name: str, ins: list[torch.Tensor]) -> tuple[int, int, int, int]:
    """``(batch, m, k, n)`` of a matmul-class op's ``[.., m, k] @ [.., k, n]`` (zeros when not a plain
    matmul, e.g. a convolution)."""
    if name in ("addmm", "baddbmm") and len(ins) >= 3:
        a, b = ins[1], ins[2]
    elif name in ("mm", "bmm", "matmul") and len(ins) >= 2:
        a, b = ins[0], ins[1]
    elif name == "linear" and len(ins) >= 2:
        a, w = ins[0], ins[1]
        return 1, int(a.numel() // a.shape[-1]), int(w.shape[-1]), int(w.shape[0])
    else:
        return 0, 0, 0, 0
    if a.dim() < 2 or b.dim() < 2:
        return 0, 0, 0, 0
    batch = int(a.numel() // (a.shape[-2] * a.shape[-1])) if a.shape[-2] * a.shape[-1] else 1
    return max(batch, 1), int(a.shape[-2]), int(a.shape[-1]), int(b.shape[-1])


def _attention_flops(q: torch.Tensor, k: torch.Tensor, causal: bool) -> float:
    """``Q·Kᵀ`` and ``P·V``: 4 · batch · heads · Lq · Lk · head_dim (half of it under a causal mask)."""
    b, h, lq, d = q.shape
    lk = k.shape[-2]
    flops = 4.0 * b * h * lq * lk * d
    return flops / 2 if causal and lq > 1 else flops


class Counter:
    """Handed to a walk's ``run``: ``with counter("name"):`` records the ops run inside under that name."""

    def __init__(
        self, params: set[int], experts_used: Callable[[int, int], float] | None, replicated: set[int] | None = None
    ) -> None:
        self.params = params
        self.experts_used = experts_used
        self.replicated = replicated or set()
        self.phases: dict[str, list[OpCount]] = {}

    def __call__(self, name: str) -> _Recorder:
        recorder = _Recorder(self.params, self.experts_used, self.replicated)
        self.phases[name] = recorder.ops
        return recorder


def walk(
    build: Callable[[], torch.nn.Module],
    run: Callable[[torch.nn.Module, Counter], Any],
    *,
    experts_used: Callable[[int, int], float] | None = None,
    info: dict[str, Any] | None = None,
    replicated: Callable[[str], bool] | None = None,
) -> dict[str, list[OpCount]]:
    """Build a model with ``build()`` and call ``run(model, counter)`` on fake tensors; return the ops
    recorded in each ``with counter(name):`` block of ``run``, by name.

    Nothing is allocated or downloaded: parameters are fake, so a 671B-parameter model walks on a
    laptop. ``experts_used(E, rows)`` says how many of E experts a grouped matmul of ``rows`` routed
    rows reads (default ``min(E, rows)``). Raises whatever the model raises on fake tensors (for
    example a data-dependent shape). ``info``, when given, receives ``param_bytes`` (the model's
    parameter bytes at the dtype it was built with). ``replicated(name)`` marks the parameters a
    deployment keeps whole on every TP rank (their ops get ``replicated=True``).
    """
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(allow_non_fake_inputs=True):
        model = build()
        rep = {p.untyped_storage()._cdata for n, p in model.named_parameters() if replicated and replicated(n)}
        counter = Counter({p.untyped_storage()._cdata for p in model.parameters()}, experts_used, rep)
        if info is not None:
            info["param_bytes"] = sum(p.numel() * p.element_size() for p in model.parameters())
        with torch.no_grad():
            run(model, counter)
    return counter.phases
