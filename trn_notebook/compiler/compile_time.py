"""Modeled Neuron compile time of a graph (``neuronx-cc``'s, not our compiler's wall time).

Our compiler compiles a graph in about a second on a laptop; the Neuron compiler takes tens of
seconds to many minutes (``shared/reference/trn2-model-figures.md``, "Compile times"). The figure a
bucket plan, a warm-up or a migration budget needs is the Neuron one, so every compile time the
toolkit shows carries this modeled figure beside the measured (simulator) one.

**The model.** Every ``neuronx-cc`` invocation pays a fixed price whatever the graph — start-up, the
frontend, HLO passes, the scheduling floor, NEFF packaging — and then a part that grows with what it
schedules. The Neuron compiler lowers every kernel of the per-rank graph to engine instructions and
schedules them; a kernel's instructions are its tiles: a matmul issues one TensorE instruction per
128 x 128 stationary by 512-column moving tile, so ``flops / (2 * 128 * 128 * 512)`` when the rows
fill the partitions, and at least one per 128 x 512 tile of its operands (``elements / (128 * 512)``)
when they do not (a decode step's matmul still tiles every weight); any other kernel issues at least
one. Per rank: FLOPs and bytes / TP. Then, per graph,

    modeled compile seconds = NEURON_COMPILE_FIXED_S + NEURON_COMPILE_S_PER_INSTRUCTION x instructions

**Two constants, fitted on two rows** (``fidelity.fit.ALL_FITTED``; :func:`fit_two_rows` solves them):
one small graph, ViT-L compiled by TorchNeuron's native ``torch.compile`` path (~20 s, one graph,
neuronx-distributed-inference PR #116), and one large, Trinity-Mini at batch 1 (3.9 min, trn2.3xlarge
TP4, its two graphs, NxD Inference contrib/models/Trinity/README.md). Every other compile row of the
reference is held out and reported in ``docs/fidelity.md`` (``benchmarks/bench_fidelity.py`` recomputes
the fit and the held-out ratios). Published small-graph compiles span 8.4 s (vLLM Neuron's
structured-output NEFF recompilation) to 20 s (ViT-L): :data:`SMALL_GRAPH_RANGE_S`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

TILE_FLOPS = 2.0 * 128 * 128 * 512  # one nc_matmul: 128x128 stationary x 512 moving columns (FLOPs)
TILE_ELEMENTS = 128 * 512  # one SBUF tile of 128 partitions x 512 elements
# Fitted jointly on two rows (``fit_two_rows``; ``benchmarks/bench_fidelity.py`` prints the derivation):
# ViT-L, one graph of 18,810 instructions, ~20 s; Trinity-Mini TP4 batch 1, two graphs of 611,521, 234 s.
NEURON_COMPILE_FIXED_S = 13.6  # s per graph, whatever its size (neuronx-cc start-up to NEFF packaging)
NEURON_COMPILE_S_PER_INSTRUCTION = 3.38e-4  # s per scheduled instruction
DERIVED_FROM = (
    "ViT-L, TorchNeuron native (~20 s, one graph; neuronx-distributed-inference PR #116) and Trinity-Mini "
    "batch 1 TP4 (3.9 min, two graphs; NxD Inference contrib/models/Trinity/README.md)"
)
SMALL_GRAPH_RANGE_S = (8.4, 20.0)
"""Published compile times of single small graphs: vLLM Neuron's structured-output NEFF recompilation
(~8.4 s, aws-neuron-sdk vllm-neuron/docs/design/vllm/structured-outputs-and-tool-calling.md L193) to ViT-L
(~20 s). The sources disagree by this much; the fixed part sits inside the range."""


def kernel_instructions(flops: float, nbytes: float, itemsize: int = 2, tp: int = 1) -> float:
    """Instructions the Neuron compiler schedules for one kernel of ``flops`` FLOPs moving ``nbytes``
    bytes (inputs + outputs) of ``itemsize``-byte elements, split over ``tp`` ranks (see the module
    docstring). Raises ``ValueError`` for a negative size or ``tp`` < 1."""
    if flops < 0 or nbytes < 0 or tp < 1 or itemsize < 1:
        raise ValueError(f"kernel size must be non-negative and tp >= 1 (got {flops=}, {nbytes=}, {tp=})")
    return max(1.0, flops / tp / TILE_FLOPS, nbytes / itemsize / tp / TILE_ELEMENTS)


def matmul_instructions(batch: int, m: int, k: int, n: int) -> float:
    """``nc_matmul`` instructions of ``batch`` products ``[m, k] @ [k, n]`` (one rank's shape): one per
    128 x 128 stationary tile of the ``[k, n]`` operand per 512 moving rows. Raises ``ValueError`` for a
    negative size."""
    if min(batch, m, k, n) < 0:
        raise ValueError(f"matmul sizes must be non-negative (got {batch=}, {m=}, {k=}, {n=})")
    if not (batch and m and k and n):
        return 0.0
    return float(batch * math.ceil(k / 128) * math.ceil(n / 128) * math.ceil(m / 512))


def graph_instructions(kernels: Iterable[tuple[float, float, int]], tp: int = 1) -> float:
    """Sum of :func:`kernel_instructions` over ``(flops, bytes, itemsize)`` kernels of one graph."""
    return math.fsum(kernel_instructions(f, b, i, tp) for f, b, i in kernels)


def modeled_compile_s(instructions: float, graphs: int = 1) -> float:
    """Modeled Neuron compile seconds of ``graphs`` graphs totalling ``instructions`` instructions: the fixed
    part per graph plus the part per instruction. Raises ``ValueError`` for a negative count."""
    if instructions < 0 or graphs < 0:
        raise ValueError(f"instruction and graph counts must be non-negative, got {instructions=}, {graphs=}")
    return NEURON_COMPILE_FIXED_S * graphs + NEURON_COMPILE_S_PER_INSTRUCTION * instructions


def fit_two_rows(small: tuple[int, float, float], large: tuple[int, float, float]) -> tuple[float, float]:
    """``(fixed seconds per graph, seconds per instruction)`` through two published compiles, each given as
    ``(graphs, instructions, seconds)``. Raises ``ValueError`` when the two rows do not determine both (the
    same instructions per graph) or give a negative constant."""
    (g1, n1, t1), (g2, n2, t2) = small, large
    det = g1 * n2 - g2 * n1
    if det == 0:
        raise ValueError("the two rows have the same instructions per graph: they cannot separate the two parts")
    fixed, rate = (t1 * n2 - t2 * n1) / det, (g1 * t2 - g2 * t1) / det
    if fixed < 0 or rate < 0:
        raise ValueError(f"the two rows give a negative constant ({fixed=:.3g}, {rate=:.3g}); choose other rows")
    return fixed, rate


def record_compile_s(record: Mapping[str, Any] | Any) -> float | None:
    """Modeled Neuron compile seconds of one compile-log record (a ``CompileRecord`` or a mapping with
    ``neuron_instructions``); None when the record does not carry an instruction count (a record from
    real hardware, or one written before the count existed)."""
    get = record.get if isinstance(record, Mapping) else lambda k, d=None: getattr(record, k, d)
    n = get("neuron_instructions", None)
    if n is None:
        extra = get("extra", None) or {}
        n = extra.get("neuron_instructions")
    return None if n is None else modeled_compile_s(float(n), 1)  # a record is one graph


def records_compile_s(records: Iterable[Mapping[str, Any] | Any]) -> float | None:
    """Modeled Neuron compile seconds of a set of records (their cold compiles, summed); None when no
    record carries an instruction count."""
    values = [v for v in (record_compile_s(r) for r in records) if v is not None]
    return math.fsum(values) if values else None


def schedule_instructions(graph: Any, schedule: Any) -> float:
    """Instructions of one of our compiled graphs (its schedule's kernels; kernels that launch nothing,
    ``engine == "none"``, are skipped). Elements are counted at the graph's first floating input's
    width (4 bytes for FP32 graphs, 2 for BF16/FP16)."""
    from .ir import DTYPES

    width = 2
    for _, t in getattr(graph, "inputs", ()):
        torch_dtype = DTYPES.get(t.dtype)
        if torch_dtype is not None and torch_dtype.is_floating_point:
            width = torch_dtype.itemsize
            break
    kernels = [(k.flops, k.bytes_in + k.bytes_out, width) for k in schedule.kernels if k.engine != "none"]
    return graph_instructions(kernels)
