"""AWS's three-way numerics ratio: how far a result is from FP32, relative to how far CPU BF16 is.

``ratio = |candidate − FP32| / |CPU BF16 − FP32|`` in the L-inf and the L2 norm; a module passes below
:data:`THRESHOLD` (1.5) in both ("for dense TP-only models expect ratios close to 1.0"). Source:
aws-neuron-sdk ``vllm-neuron/docs/design/accuracy/tensor_compare_design.md`` L109–172 (at 81ce03a).
This is the one implementation; ``nki.check`` and the three-way comparison both use it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

THRESHOLD = 1.5
SOURCE = "aws-neuron-sdk vllm-neuron/docs/design/accuracy/tensor_compare_design.md L109-172"


@dataclass(frozen=True)
class NumericsRatio:
    """The ratio in both norms plus the distances it is made of (``inf`` when BF16 equals FP32 and the
    candidate does not; ``1.0`` when both equal FP32)."""

    linf: float
    l2: float
    candidate_linf: float
    candidate_l2: float
    bf16_linf: float
    bf16_l2: float
    threshold: float = THRESHOLD

    @property
    def passed(self) -> bool:
        """Both ratios below the threshold."""
        return self.linf < self.threshold and self.l2 < self.threshold

    def label(self) -> str:
        """One line: ``ratio L-inf 1.02, L2 0.98 (< 1.5: pass)``."""
        verdict = "pass" if self.passed else "FAIL"
        return f"AWS ratio vs CPU BF16: L-inf {self.linf:.3g}, L2 {self.l2:.3g} (< {self.threshold:g}: {verdict})"


def _div(a: float, b: float) -> float:
    if b > 0:
        return a / b
    return 1.0 if a == 0 else math.inf


def numerics_ratio(
    candidate: torch.Tensor, fp32: torch.Tensor, cpu_bf16: torch.Tensor, *, threshold: float = THRESHOLD
) -> NumericsRatio:
    """The AWS ratio of ``candidate`` (e.g. a neuron or kernel result) against the FP32 reference and the
    CPU BF16 baseline. All three are compared in float64 on the CPU.

    Raises ``ValueError`` when the shapes differ (say which) or a tensor is empty.
    """
    shapes = {tuple(candidate.shape), tuple(fp32.shape), tuple(cpu_bf16.shape)}
    if len(shapes) != 1:
        raise ValueError(
            f"numerics_ratio needs three tensors of one shape; got candidate {tuple(candidate.shape)}, "
            f"fp32 {tuple(fp32.shape)}, cpu_bf16 {tuple(cpu_bf16.shape)}"
        )
    if candidate.numel() == 0:
        raise ValueError("numerics_ratio of empty tensors has no meaning; pass tensors with elements")
    ref = fp32.detach().cpu().double()
    c = candidate.detach().cpu().double() - ref
    b = cpu_bf16.detach().cpu().double() - ref
    c_inf, b_inf = float(c.abs().max()), float(b.abs().max())
    c_l2, b_l2 = float(c.norm()), float(b.norm())
    return NumericsRatio(_div(c_inf, b_inf), _div(c_l2, b_l2), c_inf, c_l2, b_inf, b_l2, threshold)


__all__ = ["SOURCE", "THRESHOLD", "NumericsRatio", "numerics_ratio"]
