"""Where each ATen base op runs on the simulated device: the placement view of the op registry.

The facts live in one record per op (:mod:`.op_table`, read through :mod:`.registry`);
:func:`set_op_category` overrides an op's category, :func:`policy_table` exports the table as a
pandas DataFrame, :func:`no_cpu_kernel_ops` sweeps the ATen ops that have no CPU kernel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from ... import state as _state
from .accelerator_ops import _LAYOUT_KEYS, has_cpu_kernel
from .op_table import RECORDS
from .registry import CATEGORIES, NATIVE_DTYPES, REJECTED_DTYPES, Category, OpRecord, OpRegistry, base_name

if TYPE_CHECKING:
    import pandas as pd

OpRule = OpRecord  # the record answers what the rule used to: .category and .reason

policy = OpRegistry(RECORDS)
_state.register("policy", policy, reset="op_overrides")
registry = policy


def set_op_category(name: str, category: Category, reason: str = "") -> None:
    """Override where base op ``name`` (e.g. ``"aten::sort"`` or ``"sort"``) runs.

    Raises ``TypeError`` for a non-string name, ``ValueError`` for an op ATen does not have (with
    the closest names) or an unknown category.
    """
    if not isinstance(name, str):
        raise TypeError(f"op name must be a string such as 'aten::sort' or 'sort', got {type(name).__name__}")
    base = base_name(name)
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


__all__ = [
    "CATEGORIES",
    "NATIVE_DTYPES",
    "REJECTED_DTYPES",
    "Category",
    "OpRule",
    "policy",
    "policy_table",
    "registry",
    "set_op_category",
]


def no_cpu_kernel_ops() -> list[dict[str, Any]]:
    """The sweep: every ATen overload with a tensor argument and no dense CPU kernel, and how neuron treats it.

    Each row: ``op`` (``aten::name.overload``), ``kind`` (``"accelerator only"``, or ``"other layouts"``
    when it has kernels for sparse/quantized/mkldnn/nested CPU tensors only) and ``neuron``:
    ``"decomposed"`` (runs here, equals the CPU composite), ``"unsupported: <reason>"`` (its record
    refuses it) or ``"refused: no CPU kernel"`` (the :func:`no_cpu_kernel_error`).
    """
    rows = []
    for name in sorted(torch._C._dispatch_get_all_op_names()):
        if not name.startswith("aten::") or has_cpu_kernel(name):
            continue
        base, _, overload = name.removeprefix("aten::").partition(".")
        schema = getattr(getattr(torch.ops.aten, base), overload or "default")._schema
        if not any(isinstance(a.type, torch.TensorType) or "Tensor" in str(a.type) for a in schema.arguments):
            continue  # TorchScript's scalar overloads (log.int, sum.bool): no tensor, never reach a device
        layouts = any(torch._C._dispatch_has_kernel_for_dispatch_key(name, k) for k in _LAYOUT_KEYS)
        record = registry.get(base)
        if record is not None and record.decomposed:
            neuron = "decomposed"
        elif record is not None and record.category == "unsupported":
            neuron = f"unsupported: {record.reason}"
        else:
            neuron = "refused: no CPU kernel"
        rows.append({"op": name, "kind": "other layouts" if layouts else "accelerator only", "neuron": neuron})
    return rows
