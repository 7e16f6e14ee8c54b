"""Modeled Neuron compile time of a graph (``neuronx-cc``'s, not our compiler's wall time).

Our compiler compiles a graph in about a second on a laptop; the Neuron compiler takes tens of
seconds to many minutes (``shared/reference/trn2-model-figures.md``, "Compile times"). The figure a
bucket plan, a warm-up or a migration budget needs is the Neuron one, so every compile time the
toolkit shows carries this modeled figure beside the measured (simulator) one.

**The model.** The Neuron compiler lowers every kernel of the per-rank graph to engine instructions
and schedules them; its time grows with the instruction count. A kernel's instructions are its
tiles: a matmul issues one TensorE instruction per 128 x 128 stationary by 512-column moving tile,
so ``flops / (2 * 128 * 128 * 512)`` when the rows fill the partitions, and at least one per 128 x 512
tile of its operands (``elements / (128 * 512)``) when they do not (a decode step's matmul still
tiles every weight); any other kernel issues at least one. Per rank: FLOPs and bytes / TP. Then

    modeled compile seconds = NEURON_COMPILE_S_PER_INSTRUCTION x instructions

**One constant, fitted on one row** (the fourth of the model level's four fitted constants,
``fidelity.fit.ALL_FITTED``): ``NEURON_COMPILE_S_PER_INSTRUCTION`` is one published compile time
divided by the instruction count of its graphs — Trinity-Mini at batch 1 (3.9 min, trn2.3xlarge
TP4, its bucket set); every other compile row of the reference is held out and reported in
``docs/fidelity.md`` (``benchmarks/bench_fidelity.py`` recomputes the fit and the held-out ratios).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

TILE_FLOPS = 2.0 * 128 * 128 * 512  # one nc_matmul: 128x128 stationary x 512 moving columns (FLOPs)
TILE_ELEMENTS = 128 * 512  # one SBUF tile of 128 partitions x 512 elements
# Fitted on one row: Trinity-Mini batch 1, 3.9 min (NxD Inference contrib/models/Trinity/README.md) / the
# instructions of its bucket set at TP4 (``benchmarks/bench_fidelity.py`` prints the derivation).
NEURON_COMPILE_S_PER_INSTRUCTION = 3.83e-4  # 234 s / 611,521 instructions, Trinity-Mini TP4 batch 1
DERIVED_FROM = "Trinity-Mini batch 1 TP4 (3.9 min, NxD Inference contrib/models/Trinity/README.md)"


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


def modeled_compile_s(instructions: float) -> float:
    """Modeled Neuron compile seconds of graphs totalling ``instructions`` instructions."""
    if instructions < 0:
        raise ValueError(f"instruction count must be non-negative, got {instructions}")
    return NEURON_COMPILE_S_PER_INSTRUCTION * instructions


def record_compile_s(record: Mapping[str, Any] | Any) -> float | None:
    """Modeled Neuron compile seconds of one compile-log record (a ``CompileRecord`` or a mapping with
    ``neuron_instructions``); None when the record does not carry an instruction count (a record from
    real hardware, or one written before the count existed)."""
    get = record.get if isinstance(record, Mapping) else lambda k, d=None: getattr(record, k, d)
    n = get("neuron_instructions", None)
    if n is None:
        extra = get("extra", None) or {}
        n = extra.get("neuron_instructions")
    return None if n is None else modeled_compile_s(float(n))


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
