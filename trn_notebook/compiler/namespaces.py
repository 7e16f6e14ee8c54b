"""Operator namespaces that belong to PyTorch (and to us): no kernel may register there, no IR may call them.

A ``custom_call`` in the IR and a kernel registered with ``trn_notebook.nki_op`` must name an
operator of a *user* namespace (``mylib::op``, ``transformers::grouped_mm_fallback``). PyTorch's
own namespaces hold operators with unchecked geometry (``inductor::_reinterpret_tensor`` reads any
memory, ``inductor::_mm_plus_mm`` writes through its output's strides) and ATen, which a kernel
could otherwise replace for the whole process.
"""

from __future__ import annotations

RESERVED_NAMESPACES = frozenset(
    {
        "aten", "prim", "prims", "c10d", "_c10d_functional", "_c10d_functional_autograd", "_dtensor", "_native",
        "_quantized", "_test", "debug_mode_ops", "debugprims", "export", "inductor", "inductor_prims", "mkl",
        "mkldnn", "mkldnn_prepacked", "onednn", "profiler", "quantization", "quantized", "rngprims", "sparse",
        "static_runtime", "symm_mem", "higher_order", "autograd", "torch", "fbgemm", "xnnpack", "cuda", "mps",
        "xla", "neuron", "trn", "trn_notebook", "nki",
    }
)  # fmt: skip
"""PyTorch's operator namespaces (those of ``torch._C._dispatch_get_all_op_names()`` in torch 2.13 and a few
more it may add) and ours; any namespace starting with ``_`` is reserved too."""


def is_user_namespace(ns: str) -> bool:
    """True when ``ns`` is an identifier outside :data:`RESERVED_NAMESPACES` that does not start with ``_``."""
    return ns.isidentifier() and not ns.startswith("_") and ns not in RESERVED_NAMESPACES
