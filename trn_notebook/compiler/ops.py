"""The IR's op set: each op's kind, engine and CPU implementation, and the ATen overloads it lowers from.

Kinds drive the passes: ``view`` (no data moves), ``pointwise`` (fusible in chains), ``reduction``
(a pointwise chain may fuse into it), ``matmul`` (TensorE), ``library`` (a hand-written kernel of
the runtime: norms, softmax, pooling, gathers), ``copy`` (DMA) and ``factory``. ``core`` ops are
what decomposition leaves; the others appear only between lowering and decomposition.
Unknown names are rejected everywhere (lowering, parsing, codegen).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

aten = torch.ops.aten

KINDS = ("view", "pointwise", "reduction", "matmul", "library", "copy", "factory")


@dataclass(frozen=True)
class OpDef:
    """What the compiler knows about one IR op."""

    name: str
    kind: str
    impl: Callable[..., Any]
    core: bool = True
    transcendental: bool = False  # runs on the ScalarE (activation) engine


OPS: dict[str, OpDef] = {}
LOWERINGS: dict[Any, str] = {}  # ATen OpOverload -> IR op name


def _def(
    name: str, kind: str, impl: Callable[..., Any], *overloads: Any, core: bool = True, trans: bool = False
) -> None:
    OPS[name] = OpDef(name, kind, impl, core, trans)
    for ov in overloads or (impl,):
        LOWERINGS[ov] = name


def _overloads(packet: Any, *names: str) -> list[Any]:
    return [getattr(packet, n) for n in names if hasattr(packet, n)]


def _tensor_overloads(packet: Any) -> list[Any]:
    """Every functional overload of ``packet`` that returns tensors (no ``out=`` variants)."""
    found = []
    for n in packet.overloads():
        ov = getattr(packet, n)
        rets = ov._schema.returns
        if "out" in n or not rets or not all("Tensor" in str(r.type) for r in rets):
            continue
        if any(a.alias_info is not None and a.alias_info.is_write for a in ov._schema.arguments):
            continue
        found.append(ov)
    return found


def _defp(name: str, kind: str, packet: Any, core: bool = True, trans: bool = False) -> None:
    """Define ``name`` over every tensor overload of ATen ``packet`` (overload resolved per call)."""
    _def(name, kind, packet, *_tensor_overloads(packet), core=core, trans=trans)


# -- views: no data movement ---------------------------------------------------------------
_def("reshape", "view", aten.reshape.default, aten.reshape.default)
_def("permute", "view", aten.permute.default)
_def("expand", "view", aten.expand.default)
_def("select", "view", aten.select.int)
_def("slice", "view", aten.slice.Tensor)
_def("as_strided", "view", aten.as_strided.default)
_def("diagonal", "view", aten.diagonal.default)
_def("unfold", "view", aten.unfold.default)
_def("split", "view", aten.split.Tensor)
_def("split_with_sizes", "view", aten.split_with_sizes.default)
_def("unbind", "view", aten.unbind.int)
# non-core views, rewritten by decomposition (see passes.decompose)
_def("view", "view", aten.view.default, aten.view.default, aten._unsafe_view.default, core=False)
_def("t", "view", aten.t.default, core=False)
_def("transpose", "view", aten.transpose.int, core=False)
_def("squeeze", "view", aten.squeeze.dims, *_overloads(aten.squeeze, "default", "dim", "dims"), core=False)
_def("unsqueeze", "view", aten.unsqueeze.default, core=False)
_def("alias", "view", aten.alias.default, aten.alias.default, aten.detach.default, core=False)

# -- pointwise ---------------------------------------------------------------------------------
_UNARY = {
    "abs": False, "neg": False, "relu": False, "sign": False, "floor": False, "ceil": False, "round": False,
    "trunc": False, "logical_not": False, "bitwise_not": False, "reciprocal": False, "sqrt": True,
    "rsqrt": True, "exp": True, "exp2": True, "expm1": True, "log": True, "log2": True, "log1p": True,
    "sin": True, "cos": True, "tan": True, "tanh": True, "sigmoid": True, "erf": True, "erfinv": True,
    "gelu": True, "silu": True, "hardtanh": False, "leaky_relu": False, "elu": True, "softplus": True,
    "atan": True, "asin": True, "acos": True, "sinh": True, "cosh": True, "isnan": False, "isinf": False,
    "hardswish": False, "hardsigmoid": False, "mish": True, "frac": False, "square": False,
}  # fmt: skip
for _name, _trans in _UNARY.items():
    _packet = getattr(aten, _name)
    _def(_name, "pointwise", _packet.default, _packet.default, trans=_trans)

_BINARY = (
    "add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
    "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
    "remainder", "fmod", "atan2", "floor_divide",
)  # fmt: skip
for _name in _BINARY:
    _packet = getattr(aten, _name)
    _defp(_name, "pointwise", _packet, trans=_name in ("pow", "atan2"))
_defp("where", "pointwise", aten.where)
_defp("clamp", "pointwise", aten.clamp)
_def("clamp_min", "pointwise", aten.clamp_min.default)
_def("clamp_max", "pointwise", aten.clamp_max.default)
_defp("masked_fill", "pointwise", aten.masked_fill)
_defp("lerp", "pointwise", aten.lerp)
_def("addcmul", "pointwise", aten.addcmul.default)
_def("addcdiv", "pointwise", aten.addcdiv.default)
_def("cast", "pointwise", aten._to_copy.default, aten._to_copy.default)
_def("convert_element_type", "pointwise", torch.ops.prims.convert_element_type.default)
_def("gelu_backward", "pointwise", aten.gelu_backward.default, trans=True)
_def("sigmoid_backward", "pointwise", aten.sigmoid_backward.default)
_def("tanh_backward", "pointwise", aten.tanh_backward.default)
_def("silu_backward", "pointwise", aten.silu_backward.default, trans=True)
_def("hardtanh_backward", "pointwise", aten.hardtanh_backward.default)
_def("leaky_relu_backward", "pointwise", aten.leaky_relu_backward.default)
_def("elu_backward", "pointwise", aten.elu_backward.default)
_def("softplus_backward", "pointwise", aten.softplus_backward.default, trans=True)
_def("threshold_backward", "pointwise", aten.threshold_backward.default)
_defp("rsub", "pointwise", aten.rsub, core=False)
_def("full_like", "factory", aten.full_like.default)
_def("zeros_like", "factory", aten.zeros_like.default, core=False)
_def("ones_like", "factory", aten.ones_like.default, core=False)

# -- reductions (softmax-class included: a pointwise chain may fuse into them) -----------------
_defp("sum", "reduction", aten.sum)
_defp("mean", "reduction", aten.mean, core=False)
_def("amax", "reduction", aten.amax.default)
_def("amin", "reduction", aten.amin.default)
_def("argmax", "reduction", aten.argmax.default)
_def("argmin", "reduction", aten.argmin.default)
_def("max_dim", "reduction", aten.max.dim)
_def("min_dim", "reduction", aten.min.dim)
_def("max", "reduction", aten.max.default)
_def("min", "reduction", aten.min.default)
_defp("prod", "reduction", aten.prod)
_def("var", "reduction", aten.var.correction)
_def("var_mean", "reduction", aten.var_mean.correction)
_defp("any", "reduction", aten.any)
_defp("all", "reduction", aten.all)
_def("logsumexp", "reduction", aten.logsumexp.default, trans=True)
_def("softmax", "reduction", aten._softmax.default, aten._softmax.default, trans=True)
_def("safe_softmax", "reduction", aten._safe_softmax.default, trans=True)
_def("log_softmax", "reduction", aten._log_softmax.default, trans=True)
_def("softmax_backward", "reduction", aten._softmax_backward_data.default)
_def("log_softmax_backward", "reduction", aten._log_softmax_backward_data.default, trans=True)
_def("cumsum", "reduction", aten.cumsum.default)

# -- matmul-class (TensorE) ----------------------------------------------------------------
_def("mm", "matmul", aten.mm.default)
_def("bmm", "matmul", aten.bmm.default)
_def("addmm", "matmul", aten.addmm.default)
_def("baddbmm", "matmul", aten.baddbmm.default)
_def("convolution", "matmul", aten.convolution.default)
_def("convolution_backward", "matmul", aten.convolution_backward.default)
_def("sdpa_flash", "matmul", aten._scaled_dot_product_flash_attention_for_cpu.default)
_def("sdpa_flash_backward", "matmul", aten._scaled_dot_product_flash_attention_for_cpu_backward.default)

# -- library kernels -----------------------------------------------------------------------
_LIBRARY = {
    "layer_norm": aten.native_layer_norm.default,
    "layer_norm_backward": aten.native_layer_norm_backward.default,
    "batch_norm": aten._native_batch_norm_legit_functional.default,
    "batch_norm_no_training": aten._native_batch_norm_legit_no_training.default,
    "batch_norm_backward": aten.native_batch_norm_backward.default,
    "group_norm": aten.native_group_norm.default,
    "group_norm_backward": aten.native_group_norm_backward.default,
    "max_pool2d": aten.max_pool2d_with_indices.default,
    "max_pool2d_backward": aten.max_pool2d_with_indices_backward.default,
    "avg_pool2d": aten.avg_pool2d.default,
    "avg_pool2d_backward": aten.avg_pool2d_backward.default,
    "adaptive_avg_pool2d": aten._adaptive_avg_pool2d.default,
    "adaptive_avg_pool2d_backward": aten._adaptive_avg_pool2d_backward.default,
    "embedding": aten.embedding.default,
    "embedding_backward": aten.embedding_dense_backward.default,
    "nll_loss": aten.nll_loss_forward.default,
    "nll_loss_backward": aten.nll_loss_backward.default,
    "mse_loss": aten.mse_loss.default,
    "mse_loss_backward": aten.mse_loss_backward.default,
    "index_select": aten.index_select.default,
    "gather": aten.gather.default,
    "scatter_add": aten.scatter_add.default,
    "index": aten.index.Tensor,
    "index_put": aten.index_put.default,
    "select_backward": aten.select_backward.default,
    "slice_backward": aten.slice_backward.default,
    "constant_pad_nd": aten.constant_pad_nd.default,
    "native_dropout": aten.native_dropout.default,
    "native_dropout_backward": aten.native_dropout_backward.default,
    "sort": aten.sort.default,
    "topk": aten.topk.default,
    "tril": aten.tril.default,
    "triu": aten.triu.default,
    "flip": aten.flip.default,
    "roll": aten.roll.default,
    "repeat": aten.repeat.default,
}
for _name, _ov in _LIBRARY.items():
    _def(_name, "library", _ov)
_def("cat", "copy", aten.cat.default)
_def("stack", "copy", aten.stack.default)
_def("clone", "copy", aten.clone.default)
_def("contiguous", "copy", torch.Tensor.contiguous, aten.contiguous.default)
_def("copy", "copy", aten.copy.default)

# -- factories -------------------------------------------------------------------------------
_def("full", "factory", aten.full.default)
_def("zeros", "factory", aten.zeros.default, core=False)
_def("ones", "factory", aten.ones.default, core=False)
_def("scalar_tensor", "factory", aten.scalar_tensor.default)
_defp("arange", "factory", aten.arange)
_def("empty", "factory", aten.empty.memory_format)
_def("empty_strided", "factory", aten.empty_strided.default)
_def("rand_like", "factory", aten.rand_like.default)
_def("randn_like", "factory", aten.randn_like.default)
_def("bernoulli", "factory", aten.bernoulli.p)
_def("lift_fresh_copy", "copy", aten.lift_fresh_copy.default)

RANDOM_OPS = frozenset({"rand_like", "randn_like", "bernoulli", "native_dropout", "empty", "empty_strided"})


def get(name: str) -> OpDef:
    """The op named ``name``; raises ``KeyError`` naming the op when unknown."""
    try:
        return OPS[name]
    except KeyError:
        raise KeyError(f"unknown IR op {name!r} ({len(OPS)} ops known, e.g. {sorted(OPS)[:8]})") from None


def engine_of(kinds: set[str], transcendental: bool) -> str:
    """The NeuronCore engine a fused kernel of these op kinds runs on."""
    if "matmul" in kinds:
        return "TensorE"
    if kinds <= {"view"}:
        return "none"
    if kinds & {"copy"} and kinds <= {"copy", "view"}:
        return "DMA"
    if "library" in kinds:
        return "GpSimdE"
    if transcendental:
        return "ScalarE"
    return "VectorE"
