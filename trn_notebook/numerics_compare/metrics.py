"""Per-module figures of a three-way comparison, computed once: the AWS ratio, errors, cosine, heat maps.

The ratio is :func:`trn_notebook.aws_ratio.numerics_ratio` (AWS's ``|neuron − FP32| / |CPU BF16 − FP32|``,
the one implementation). "max rel" is the largest absolute error over the largest FP32 magnitude of the
tensor (norm-wise, so elements near zero do not blow it up). Heat maps are ``|neuron − FP32|`` of the
tensor viewed as ``(elements / last dim, last dim)`` and max-pooled to at most :data:`HEAT_ROWS` ×
:data:`HEAT_COLS` cells.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch

from ..aws_ratio import numerics_ratio
from .capture import Capture, ModuleCall

__all__ = ["HEAT_COLS", "HEAT_ROWS", "Heatmap", "ModuleRow", "first_crossing", "heatmap", "module_rows"]

HEAT_ROWS = 32
HEAT_COLS = 64
ROOT_LABEL = "(model)"


@dataclass(frozen=True)
class ModuleRow:
    """The figures of one module call (neuron vs FP32, CPU BF16 vs FP32) and where its class is written."""

    index: int
    key: str
    module: str
    cls: str
    shape: tuple[int, ...]
    ratio_linf: float
    ratio_l2: float
    max_abs: float
    max_rel: float
    cosine: float
    bf16_max_abs: float
    bf16_max_rel: float
    source: str

    def crosses(self, threshold: float) -> bool:
        """True when either ratio is at or above ``threshold`` (AWS: a module passes below it in both norms)."""
        return not (self.ratio_linf < threshold and self.ratio_l2 < threshold)


@dataclass(frozen=True)
class Heatmap:
    """``|neuron − FP32|`` of one module output, max-pooled to ``rows`` × ``cols`` (row-major ``values``)."""

    key: str
    rows: int
    cols: int
    values: tuple[float, ...]
    max: float
    shape: tuple[int, ...]


def _cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.flatten(), b.flatten()  # float32 products, float64 sums (torch.dot's accumulation would be float32)
    na, nb = float(a.square().sum(dtype=torch.float64)), float(b.square().sum(dtype=torch.float64))
    if na == 0.0 or nb == 0.0:
        return 1.0 if na == nb else 0.0
    return float((a * b).sum(dtype=torch.float64)) / math.sqrt(na * nb)


def _rel(err: float, ref: torch.Tensor) -> float:
    scale = float(ref.abs().max()) if ref.numel() else 0.0
    if scale > 0:
        return err / scale
    return 0.0 if err == 0 else math.inf


def module_rows(
    fp32: Capture, bf16: Capture, neuron: Capture, sources: dict[str, str], *, threshold: float
) -> list[ModuleRow]:
    """One row per module call present with one shape in all three runs, in the order the calls finished."""
    rows: list[ModuleRow] = []
    memo: dict[tuple[int, int, int], ModuleRow] = {}  # the same three captures (a block and its last child): once
    for key, ref in fp32.calls.items():
        b, n = bf16.calls.get(key), neuron.calls.get(key)
        if b is None or n is None or not (ref.output.shape == b.output.shape == n.output.shape):
            continue
        if ref.output.numel() == 0:
            continue
        same = memo.get((id(ref.output), id(b.output), id(n.output)))
        if same is not None:
            rows.append(
                dataclasses.replace(
                    same,
                    index=len(rows),
                    key=key,
                    module=key or ROOT_LABEL,
                    cls=ref.cls,
                    source=sources.get(ref.name, "(unknown)"),
                )
            )
            continue
        r = numerics_ratio(n.output, ref.output, b.output, threshold=threshold)
        rows.append(
            ModuleRow(
                index=len(rows),
                key=key,
                module=key or ROOT_LABEL,
                cls=ref.cls,
                shape=tuple(ref.output.shape),
                ratio_linf=r.linf,
                ratio_l2=r.l2,
                max_abs=r.candidate_linf,
                max_rel=_rel(r.candidate_linf, ref.output),
                cosine=_cosine(n.output, ref.output),
                bf16_max_abs=r.bf16_linf,
                bf16_max_rel=_rel(r.bf16_linf, ref.output),
                source=sources.get(ref.name, "(unknown)"),
            )
        )
        memo[(id(ref.output), id(b.output), id(n.output))] = rows[-1]
    return rows


def first_crossing(rows: list[ModuleRow], threshold: float) -> ModuleRow | None:
    """The first module call (in finishing order: inner modules before the blocks holding them) whose
    ratio reaches ``threshold``; None when every module passes."""
    return next((r for r in rows if r.crosses(threshold)), None)


def heatmap(ref: ModuleCall, cand: ModuleCall) -> Heatmap:
    """The error heat map of one module call (``|cand − ref|``, max-pooled)."""
    err = (cand.output - ref.output).abs()  # both float32 CPU captures
    shape = tuple(err.shape)
    if err.dim() == 0:
        err = err.reshape(1, 1)
    elif err.dim() == 1:
        err = err.reshape(1, -1)
    else:
        err = err.reshape(-1, err.shape[-1])
    rows, cols = min(HEAT_ROWS, err.shape[0]), min(HEAT_COLS, err.shape[1])
    pooled = torch.nn.functional.adaptive_max_pool2d(err[None, None], (rows, cols))[0, 0]
    values = tuple(pooled.flatten().tolist())
    return Heatmap(ref.key, rows, cols, values, max(values, default=0.0), shape)
