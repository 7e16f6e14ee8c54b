"""Engine-level cost model of one NeuronCore running a kernel (all figures are *modeled*).

Each instruction occupies one engine lane (TensorE, VectorE, ScalarE, GpSimdE) or a share of the
16 DMA queues; engines run in parallel. An instruction starts in the first gap of its lane after
every tile region it reads (or overwrites) has been produced (read-after-write and
write-after-write; buffers are assumed renamed, so write-after-read never waits): a list
scheduler standing in for the compiler's scheduling of independent loop iterations. Costs are
the per-instruction formulas of the NKI ISA documentation (SDK 2.26 ``nki.isa`` cost notes and the
architecture guides, see ``shared/reference/trainium-figures.md`` A2/A3 and ``docs/fidelity.md``).
Every constant is overridable with :func:`set_kernel_cost_constants`.
"""

from __future__ import annotations

import bisect
import dataclasses
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import state as _state
from ..device.chips import get_chip_spec
from ..device.config import replace_fields

ENGINES = ("TensorE", "VectorE", "ScalarE", "GpSimdE")
KiB = 1024


@dataclass(frozen=True)
class CoreSpec:
    """One NeuronCore generation: engine clocks, data paths, on-chip memory and DMA."""

    name: str
    tensor_hz: float
    vector_hz: float
    scalar_hz: float
    gpsimd_hz: float
    vector_fp32_per_cycle: int  # elements per partition per cycle (data-path width / 128)
    vector_bf16_per_cycle: int
    sbuf_partition_bytes: int
    psum_partition_bytes: int
    psum_banks: int
    moving_fmax: int  # nc_matmul moving free size limit (one PSUM bank on v2/v3)
    dma_queues: int
    dma_queue_bytes_per_s: float
    hbm_bytes_per_s: float  # one physical core's share


def _core(chip: str, **kw: float | int | str) -> CoreSpec:
    spec = get_chip_spec(chip)
    return CoreSpec(
        sbuf_partition_bytes=spec.sbuf_bytes_per_core // 128,
        psum_partition_bytes=spec.psum_bytes_per_core // 128,
        psum_banks=8,
        hbm_bytes_per_s=spec.hbm_bandwidth / spec.physical_cores,
        **kw,  # type: ignore[arg-type]
    )


# Sources (trainium-figures.md): A2 engine table (trainium2_arch.rst L41-64), A5 (trainium3_arch.rst),
# DMA per engine from the DMA bandwidth guide table (23/33 B/ns; the prose's 27.2/38.4 GB/s is not used).
CORES: dict[str, CoreSpec] = {
    "trn2": _core(
        "trn2",
        name="NeuronCore-v3 (Trn2)",
        tensor_hz=2.4e9,
        vector_hz=0.96e9,
        scalar_hz=1.2e9,
        gpsimd_hz=1.2e9,
        vector_fp32_per_cycle=2,
        vector_bf16_per_cycle=4,
        moving_fmax=512,
        dma_queues=16,
        dma_queue_bytes_per_s=23e9,
    ),
    "trn3": _core(
        "trn3",
        name="NeuronCore-v4 (Trn3)",
        tensor_hz=2.4e9,
        vector_hz=1.2e9,
        scalar_hz=1.2e9,
        gpsimd_hz=1.2e9,
        vector_fp32_per_cycle=2,
        vector_bf16_per_cycle=4,
        moving_fmax=4096,
        dma_queues=16,
        dma_queue_bytes_per_s=33e9,
    ),
    # Trn1 (NeuronCore-v2), for comparing with the published NKI tutorial measurements only:
    # trainium_inferentia2_arch.rst L21 (820 GB/s per 2-core device), L65-78 (clocks, 24 MiB SBUF).
    "trn1": CoreSpec(
        name="NeuronCore-v2 (Trn1)",
        tensor_hz=2.8e9,
        vector_hz=1.12e9,
        scalar_hz=1.4e9,
        gpsimd_hz=1.4e9,
        vector_fp32_per_cycle=1,
        vector_bf16_per_cycle=1,
        sbuf_partition_bytes=192 * KiB,
        psum_partition_bytes=16 * KiB,
        psum_banks=8,
        moving_fmax=512,
        dma_queues=16,
        dma_queue_bytes_per_s=17e9,
        hbm_bytes_per_s=820e9 / 2,
    ),
}


@dataclass(frozen=True)
class KernelCostConstants:
    """Overridable constants of the instruction cost formulas (cycles of the engine's clock, seconds)."""

    min_ii_cycles: float = 64  # MIN_II of the SDK 2.26 nki.isa cost notes
    matmul_init_cycles: float = 64  # MM_INIT_LATENCY (trainium_inferentia2_arch.rst L267)
    matmul_fp32_factor: float = 4  # FP32 matmul is 4 passes (nki.isa nc_matmul cost note)
    cross_engine_wait_cycles: float = 100  # static overhead of a dependent instruction (arch guide L403)
    gpsimd_fixed_cycles: float = 150  # iota/affine_select: 150 + N (nki.isa cost notes)
    dma_fixed_latency_s: float = 1.3e-6  # semaphore-to-start, cross-engine (DMA bandwidth guide L41)
    # Bytes per descriptor (contiguous run) at which a DMA queue reaches half its peak; chosen from the
    # guide's saturation curve (<256 B "a small fraction", >=2 KiB "approaches", >=4 KiB "saturates").
    dma_half_efficiency_bytes: float = 512


_constants = KernelCostConstants()
_state.register("nki_cost_constants", _state.Globals(__name__, "_constants"), reset=False)  # settings


def get_kernel_cost_constants() -> KernelCostConstants:
    """The kernel cost constants in force."""
    return _constants


def set_kernel_cost_constants(**changes: float) -> KernelCostConstants:
    """Override kernel cost constants by name; raises ``TypeError`` naming the valid ones on a typo."""
    global _constants
    _constants = replace_fields(_constants, dict(changes), "kernel cost constant(s)")
    return _constants


def reset_kernel_cost_constants() -> None:
    """Back to the documented defaults."""
    global _constants
    _constants = KernelCostConstants()


def core_spec(chip: str) -> CoreSpec:
    """The NeuronCore model of ``chip`` (``trn1``, ``trn2``, ``trn3``); raises ``ValueError`` listing them."""
    key = chip.strip().lower().replace("trainium", "trn")
    if key not in CORES:
        raise ValueError(f"no NeuronCore model for chip {chip!r}; valid: {', '.join(sorted(CORES))}")
    return CORES[key]


# -- per-instruction costs (seconds) -------------------------------------------------------------
def matmul_s(spec: CoreSpec, stationary_free: int, moving_free: int, fp32: bool) -> float:
    """``nc_matmul``: ``max(min(64, N_stationary), N_moving)`` TensorE cycles, x4 for FP32 inputs."""
    c = _constants
    cycles = max(min(c.matmul_init_cycles, stationary_free), moving_free)
    if fp32:
        cycles *= c.matmul_fp32_factor
    return cycles / spec.tensor_hz


def transpose_tensor_s(spec: CoreSpec, partitions: int, free: int) -> float:
    """``nc_transpose`` on TensorE: ``max(P, min(64, F))`` cycles."""
    return max(partitions, min(_constants.matmul_init_cycles, free)) / spec.tensor_hz


def vector_s(spec: CoreSpec, n: int, dtype: torch.dtype, passes: float = 1.0) -> float:
    """VectorE: ``max(MIN_II, passes * N / width)`` cycles (N elements per partition)."""
    width = spec.vector_bf16_per_cycle if dtype in (torch.bfloat16, torch.float16) else spec.vector_fp32_per_cycle
    return max(_constants.min_ii_cycles, passes * n / width) / spec.vector_hz


def scalar_s(spec: CoreSpec, n: int) -> float:
    """ScalarE ``activation``: ``max(MIN_II, N)`` cycles."""
    return max(_constants.min_ii_cycles, n) / spec.scalar_hz


def gpsimd_s(spec: CoreSpec, n: int) -> float:
    """GpSimdE ``iota``/``affine_select``: ``150 + N`` cycles."""
    return (_constants.gpsimd_fixed_cycles + n) / spec.gpsimd_hz


def dma_efficiency(contiguous_bytes: float) -> float:
    """Fraction of a queue's peak reached with descriptors of ``contiguous_bytes``: ``b / (b + b_half)``."""
    b = max(contiguous_bytes, 1.0)
    return b / (b + _constants.dma_half_efficiency_bytes)


# -- the schedule ---------------------------------------------------------------------------------
@dataclass
class Record:
    """One modeled instruction."""

    name: str
    lane: str
    start: float
    end: float
    line: str


class Lane:
    """Busy intervals of one engine (or of the DMA queues as one pool), merged and sorted.

    An instruction goes into the earliest gap at or after the time its inputs are ready: a list
    scheduler, standing in for the NKI compiler's instruction scheduling across independent loop
    iterations (``affine_range``); instructions that depend on each other keep their order.
    """

    __slots__ = ("ends", "starts")

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.ends: list[float] = []

    def place(self, ready: float, duration: float) -> float:
        """Reserve ``duration`` at the earliest free time ``>= ready``; returns the start."""
        starts, ends = self.starts, self.ends
        i = bisect.bisect_right(ends, ready)
        t = ready
        while i < len(starts) and starts[i] - t < duration:
            t = max(t, ends[i])
            i += 1
        end = t + duration
        eps = 1e-15
        merge_left = i > 0 and ends[i - 1] >= t - eps
        merge_right = i < len(starts) and starts[i] <= end + eps
        if merge_left and merge_right:
            ends[i - 1] = ends[i]
            del starts[i], ends[i]
        elif merge_left:
            ends[i - 1] = end
        elif merge_right:
            starts[i] = t
        else:
            starts.insert(i, t)
            ends.insert(i, end)
        return t

    @property
    def end(self) -> float:
        return self.ends[-1] if self.ends else 0.0


@dataclass
class Scheduler:
    """Places instructions on engine lanes and the DMA queue pool subject to data dependencies."""

    spec: CoreSpec
    lanes: dict[str, Lane] = field(default_factory=lambda: {k: Lane() for k in (*ENGINES, "DMA")})
    busy: dict[str, float] = field(default_factory=lambda: dict.fromkeys((*ENGINES, "DMA"), 0.0))
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys((*ENGINES, "DMA"), 0))
    writes: dict[int, list[tuple[int, int, float, str]]] = field(default_factory=dict)
    records: list[Record] = field(default_factory=list)
    flops: float = 0.0
    dma_bytes: float = 0.0
    last_end: float = 0.0
    keep_records: int = 20_000
    touch: Any = None  # called with every instruction's operands (first use reserves on-chip space)

    def _ready(self, tensors: list, lane: str) -> tuple[float, bool]:
        """Latest end of a write overlapping any of ``tensors``; and whether it came from another lane."""
        ready = 0.0
        foreign = False
        for t in tensors:
            entries = self.writes.get(t.storage.id)
            if not entries:
                continue
            lo, hi = t.region()
            for wlo, whi, end, wlane in entries:
                if wlo < hi and lo < whi and end > ready:
                    ready = end
                    foreign = wlane != lane
        return ready, foreign

    def _written(self, tensors: list, end: float, lane: str) -> None:
        for t in tensors:
            lo, hi = t.region()
            entries = self.writes.setdefault(t.storage.id, [])
            # drop entries this write covers completely (keeps the lists short)
            entries[:] = [e for e in entries if not (lo <= e[0] and e[1] <= hi)]
            entries.append((lo, hi, end, lane))
            if len(entries) > 64:
                del entries[: len(entries) - 64]

    def engine(self, name: str, lane: str, seconds: float, reads: list, writes: list, line: str) -> None:
        """Issue a compute instruction of ``seconds`` on ``lane``."""
        if self.touch is not None:
            self.touch(reads + writes)
        ready, foreign = self._ready(reads + writes, lane)
        if foreign and ready > 0:  # a semaphore wait on another engine's result
            ready += _constants.cross_engine_wait_cycles / _hz(self.spec, lane)
        start = self.lanes[lane].place(ready, seconds)
        end = start + seconds
        self.busy[lane] += seconds
        self.counts[lane] += 1
        self.last_end = max(self.last_end, end)
        self._written(writes, end, lane)
        if len(self.records) < self.keep_records:
            self.records.append(Record(name, lane, start, end, line))

    def dma(
        self, name: str, nbytes: float, contiguous: float, partitions: int, reads: list, writes: list, line: str
    ) -> None:
        """Issue a DMA spread over ``min(queues, partitions)`` of the queues, at their per-queue bandwidth."""
        if self.touch is not None:
            self.touch(reads + writes)
        spec = self.spec
        ready, _ = self._ready(reads + writes, "DMA")
        n = max(1, min(spec.dma_queues, partitions))
        per_queue = min(spec.dma_queue_bytes_per_s, spec.hbm_bytes_per_s / spec.dma_queues)
        duration = (nbytes / n) / (per_queue * dma_efficiency(contiguous))
        share = duration * n / spec.dma_queues  # time the whole pool of queues is occupied
        start = self.lanes["DMA"].place(ready, share)
        end = start + duration + _constants.dma_fixed_latency_s
        self.busy["DMA"] += share
        self.counts["DMA"] += 1
        self.dma_bytes += nbytes
        self.last_end = max(self.last_end, end)
        self._written(writes, end, "DMA")
        if len(self.records) < self.keep_records:
            self.records.append(Record(name, "DMA", start, start + duration, line))

    def total_s(self) -> float:
        """Modeled kernel time: when the last instruction finishes."""
        return self.last_end


def _hz(spec: CoreSpec, lane: str) -> float:
    return {"TensorE": spec.tensor_hz, "VectorE": spec.vector_hz, "ScalarE": spec.scalar_hz}.get(lane, spec.gpsimd_hz)


def replace_spec(spec: CoreSpec, **changes: float | int) -> CoreSpec:
    """``spec`` with some fields replaced (what-if studies); raises ``TypeError`` on an unknown field."""
    return dataclasses.replace(spec, **changes)  # type: ignore[arg-type]


def utilisation(busy: dict[str, float], total: float) -> dict[str, float]:
    """Busy fraction of each lane over the kernel's modeled time."""
    return {k: (v / total if total > 0 else 0.0) for k, v in busy.items()}
