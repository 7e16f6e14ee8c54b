"""The op policy registry: where each ATen base op runs on the simulated device.

Categories (TorchNeuron's compatibility table, shared/reference/torchneuron.md):
``native`` (a device kernel), ``cpu_fallback`` (copied to the host, run by the CPU kernel, copied
back), ``unsupported`` (raises ``NotImplementedError``) and ``host_only`` (metadata/view ops that move
no data). The table is data: :func:`set_op_category` overrides an entry, :func:`policy_table`
exports it as a pandas DataFrame.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import torch

if TYPE_CHECKING:
    import pandas as pd

Category = Literal["native", "cpu_fallback", "unsupported", "host_only"]
CATEGORIES: tuple[Category, ...] = ("native", "cpu_fallback", "unsupported", "host_only")

# Native dtypes of the device kernels; 64-bit integers are accepted (indices) and modeled as 32-bit.
NATIVE_DTYPES = frozenset(
    {
        torch.float32,
        torch.bfloat16,
        torch.float16,
        torch.int32,
        torch.int64,
        torch.int16,
        torch.int8,
        torch.uint8,
        torch.bool,
        torch.float8_e4m3fn,
        torch.float8_e5m2,
    }
)
REJECTED_DTYPES = frozenset({torch.float64, torch.complex128})


@dataclass(frozen=True)
class OpRule:
    """Policy of one base op: category and, for fallbacks and unsupported ops, why."""

    category: Category
    reason: str = ""


_NO_KERNEL = "no native kernel in the simulated op set"
_LINALG = "linear algebra runs on the host in TorchNeuron (documented CPU fallback)"
_RNG = "random number generation uses the host generator (no device torch.Generator)"
_DYNAMIC = "output shape depends on data; the device needs static shapes"

# Documented fallbacks (torchneuron.md, Eager execution) and ops whose output size depends on data.
_FALLBACK: dict[str, str] = {
    **{
        op: _LINALG
        for op in (
            "linalg_qr",
            "_linalg_svd",
            "_linalg_eigh",
            "linalg_cholesky_ex",
            "linalg_inv_ex",
            "_linalg_det",
            "triangular_solve",
            "linalg_solve_triangular",
            "_linalg_solve_ex",
            "linalg_lu_factor_ex",
            "linalg_eig",
            "_linalg_slogdet",
            "linalg_householder_product",
            "cholesky_solve",
            "lu_unpack",
            "linalg_lstsq",
            "geqrf",
            "ormqr",
            "linalg_ldl_factor_ex",
            "linalg_matrix_exp",
            "cholesky_inverse",
        )
    },
    **{
        op: _RNG
        for op in (
            "uniform",
            "normal",
            "bernoulli",
            "random",
            "exponential",
            "geometric",
            "log_normal",
            "cauchy",
            "multinomial",
            "randperm",
            "native_dropout",
            "rand",
            "randn",
            "randint",
            "poisson",
            "_standard_gamma",
            "_sample_dirichlet",
            "binomial",
            "rrelu_with_noise",
        )
    },
    **{
        op: _DYNAMIC
        for op in (
            "nonzero",
            "unique",
            "_unique",
            "_unique2",
            "unique_dim",
            "unique_consecutive",
            "masked_select",
            "nonzero_static",
            "bincount",
            "histc",
            "histogram",
        )
    },
    "_local_scalar_dense": "reading a value is a host copy (a sync point)",
    "equal": "comparison result is read on the host",
    "sort": "no native sort kernel in the simulated op set",
    "kthvalue": "no native kernel in the simulated op set",
    "median": "no native kernel in the simulated op set",
    "nanmedian": "no native kernel in the simulated op set",
    "mode": "no native kernel in the simulated op set",
    "_cdist_forward": "no native kernel in the simulated op set",
    "_fft_r2c": "FFT runs on the host",
    "_fft_c2r": "FFT runs on the host",
    "_fft_c2c": "FFT runs on the host",
}

# Ops that are neither pointwise nor reductions by tag but have native kernels.
_NATIVE_NAMES = frozenset(
    [
        "mm",
        "addmm",
        "bmm",
        "baddbmm",
        "addbmm",
        "matmul",
        "linear",
        "dot",
        "vdot",
        "mv",
        "addmv",
        "addr",
        "outer",
        "_addmm_activation",
        "convolution",
        "convolution_overrideable",
        "convolution_backward_overrideable",
        "convolution_backward",
        "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_flash_attention_for_cpu_backward",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_flash_attention",
        "_fused_rms_norm",
        "_grouped_mm",
        "native_layer_norm",
        "native_layer_norm_backward",
        "native_batch_norm",
        "native_batch_norm_backward",
        "_native_batch_norm_legit",
        "_native_batch_norm_legit_no_training",
        "_native_batch_norm_legit_functional",
        "native_group_norm",
        "native_group_norm_backward",
        "_fused_rms_norm_backward",
        "_softmax",
        "_log_softmax",
        "_softmax_backward_data",
        "_log_softmax_backward_data",
        "embedding",
        "embedding_dense_backward",
        "index_select",
        "gather",
        "scatter",
        "scatter_add",
        "scatter_reduce",
        "index",
        "index_put",
        "index_put_",
        "_index_put_impl_",
        "index_add",
        "index_copy",
        "index_fill",
        "masked_fill",
        "masked_scatter",
        "nll_loss_forward",
        "nll_loss_backward",
        "nll_loss2d_forward",
        "nll_loss2d_backward",
        "mse_loss",
        "mse_loss_backward",
        "cat",
        "stack",
        "copy",
        "_copy_from",
        "_copy_from_and_resize",
        "clone",
        "contiguous",
        "_to_copy",
        "fill",
        "zero",
        "ones",
        "zeros",
        "full",
        "empty",
        "empty_strided",
        "arange",
        "linspace",
        "logspace",
        "eye",
        "tril",
        "triu",
        "where",
        "clamp",
        "clamp_min",
        "clamp_max",
        "cumsum",
        "cumprod",
        "topk",
        "max_pool2d_with_indices",
        "max_pool2d_with_indices_backward",
        "avg_pool2d",
        "avg_pool2d_backward",
        "_adaptive_avg_pool2d",
        "_adaptive_avg_pool2d_backward",
        "adaptive_max_pool2d",
        "upsample_nearest2d",
        "upsample_bilinear2d",
        "constant_pad_nd",
        "flip",
        "roll",
        "repeat",
        "_foreach_add",
        "_foreach_mul",
        "_fused_adam",
        "_fused_adamw",
        "_fused_sgd",
        "threshold_backward",
        "gelu_backward",
        "silu_backward",
        "sigmoid_backward",
        "tanh_backward",
        "softplus_backward",
        "hardtanh_backward",
        "leaky_relu_backward",
        "elu_backward",
        "_amp_foreach_non_finite_check_and_unscale",
        "_amp_update_scale",
        "one_hot",
        "resize",
    ]
)

# Metadata and view ops: no data moves, nothing runs on an engine.
_HOST_ONLY = frozenset(
    [
        "as_strided",
        "view",
        "_unsafe_view",
        "_reshape_alias",
        "reshape",
        "alias",
        "detach",
        "t",
        "transpose",
        "permute",
        "expand",
        "squeeze",
        "unsqueeze",
        "slice",
        "select",
        "split",
        "split_with_sizes",
        "unbind",
        "narrow",
        "diagonal",
        "unfold",
        "view_as_real",
        "view_as_complex",
        "_neg_view",
        "_conj",
        "lift_fresh",
        "set_",
        "resize_",
        "_resize_output_",
        "is_pinned",
        "_pin_memory",
        "unsafe_split",
        "chunk",
        "movedim",
        "swapaxes",
        "real",
        "imag",
        "_nested_view_from_buffer",
        "sym_size",
        "sym_stride",
        "sym_numel",
        "sym_storage_offset",
        "is_same_size",
        "_has_compatible_shallow_copy_type",
    ]
)


class OpPolicy:
    """Registry mapping an ATen base op name to an :class:`OpRule`; thread-safe and overridable."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._overrides: dict[str, OpRule] = {}
        self.version = 0  # bumped on every change so callers can drop cached decisions

    def rule(self, name: str, op: torch._ops.OpOverload | None = None) -> OpRule:
        """The rule for base op ``name`` (user override, then the built-in table, then op tags)."""
        override = self._overrides.get(name)
        if override is not None:
            return override
        if name in _HOST_ONLY:
            return OpRule("host_only")
        if name in _FALLBACK:
            return OpRule("cpu_fallback", _FALLBACK[name])
        if name in _NATIVE_NAMES:
            return OpRule("native")
        if op is not None:
            tags = op.tags
            if torch.Tag.pointwise in tags or torch.Tag.reduction in tags:
                return OpRule("native")
            returns = op._schema.returns
            if returns and all(r.alias_info is not None and not r.alias_info.is_write for r in returns):
                return OpRule("host_only")
        if name.startswith("_foreach_"):
            return OpRule("native")
        if name.endswith("_") and len(name) > 1:  # in-place variant: same rule as the functional op
            functional = self.rule(name[:-1])
            if functional.reason != _NO_KERNEL:
                return functional
        return OpRule("cpu_fallback", _NO_KERNEL)

    def set(self, name: str, category: Category, reason: str = "") -> None:
        """Override the category of base op ``name``; raises ``ValueError`` on an unknown category."""
        if category not in CATEGORIES:
            raise ValueError(f"unknown category {category!r}; valid: {', '.join(CATEGORIES)}")
        with self._lock:
            self._overrides[_base_name(name)] = OpRule(category, reason or f"set by user to {category}")
            self.version += 1

    def clear(self, name: str | None = None) -> None:
        """Drop the override of ``name`` (or of every op)."""
        with self._lock:
            if name is None:
                self._overrides.clear()
            else:
                self._overrides.pop(_base_name(name), None)
            self.version += 1

    def table(self) -> pd.DataFrame:
        """The built-in table plus overrides as a DataFrame (op, category, reason, source)."""
        import pandas as pd

        rows = []
        for name in sorted(_HOST_ONLY):
            rows.append((name, "host_only", "metadata/view op", "built-in"))
        for name in sorted(_NATIVE_NAMES):
            rows.append((name, "native", "", "built-in"))
        for name, reason in sorted(_FALLBACK.items()):
            rows.append((name, "cpu_fallback", reason, "built-in"))
        df = pd.DataFrame(rows, columns=["op", "category", "reason", "source"]).set_index("op")
        for name, rule in self._overrides.items():
            df.loc[name] = [rule.category, rule.reason, "override"]
        return df


def _base_name(name: str) -> str:
    name = name.removeprefix("aten::")
    return name.split(".", 1)[0]


policy = OpPolicy()


def set_op_category(name: str, category: Category, reason: str = "") -> None:
    """Override where base op ``name`` (e.g. ``"aten::sort"`` or ``"sort"``) runs.

    Raises ``TypeError`` for a non-string name, ``ValueError`` for an op ATen does not have (with
    the closest names) or an unknown category.
    """
    if not isinstance(name, str):
        raise TypeError(f"op name must be a string such as 'aten::sort' or 'sort', got {type(name).__name__}")
    base = _base_name(name)
    known = {n[6:].split(".")[0] for n in torch._C._dispatch_get_all_op_names() if n.startswith("aten::")}
    if base not in known:
        import difflib

        close = difflib.get_close_matches(base, sorted(known), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else "; see trn_notebook.device.policy_table()"
        raise ValueError(f"{name!r} is not an ATen op{hint}")
    policy.set(name, category, reason)


def policy_table() -> pd.DataFrame:
    """The op policy table as a pandas DataFrame."""
    return policy.table()
