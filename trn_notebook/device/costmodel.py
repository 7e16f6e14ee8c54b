"""Roofline cost model: how long an op, a transfer or a compiled kernel takes on the modeled device.

Every constant names its source; all can be overridden with :func:`set_cost_constants`.
A device op costs ``launch + max(flops / (MFU · peak(dtype)), bytes / (MBU · hbm_bandwidth))`` (a
roofline at calibrated efficiencies; ``compute_efficiency`` and ``memory_efficiency`` are fitted on
published model-level figures, docs/fidelity.md "Model level").
A CPU fallback's *modeled* cost is the modeled copies both ways plus a modeled host compute (a
roofline on the host CPU), never a measured wall time: one meaning of "modeled" everywhere.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from .. import state as _state
from .chips import ChipSpec
from .config import replace_fields
from .ops.policy import policy


@dataclass(frozen=True)
class CostConstants:
    """Overridable constants of the cost model (seconds and bytes/s)."""

    # Framework dispatch per eager op on the host. Source: published TorchNeuron eager speed of
    # ~0.2 ms per small op (torchneuron.md, "Eager execution"); we split it 50 µs host + 150 µs launch.
    eager_host_dispatch_s: float = 50e-6
    # Launch of one eager kernel on the device (the other 150 µs of the ~0.2 ms above).
    eager_launch_s: float = 150e-6
    # Launch of one compiled executable. Source: ~0.44 ms idle between synchronous executable
    # launches in a runtime design note (torchneuron.md, Hardware); we charge a third of it as launch
    # and leave the rest to host/sync effects. Assumption, marked as such.
    graph_launch_s: float = 150e-6
    # Instruction dispatch of one fused kernel inside an executable. Assumption (no published figure).
    kernel_in_graph_s: float = 2e-6
    # Host<->device copies: PCIe Gen5 x16 effective ~32 GB/s and ~10 µs per DMA setup. Assumption.
    transfer_bandwidth: float = 32e9
    transfer_latency_s: float = 10e-6
    # Calibrated efficiencies (AWS's own roofline method: prefill latency = FLOPs / (MFU x peak), decode
    # latency = bytes / (MBU x HBM bandwidth); aws-neuron-sdk vllm-neuron/docs/model-dev/
    # optimizing-vlm-models.md, "Roofline analysis"). No MFU/MBU value is published: both are FITTED on
    # the model-level rows of shared/reference/trn2-model-figures.md (docs/fidelity.md, "Model level"
    # says which rows). Every kernel, eager or compiled, uses them. The per-dtype difference is the peak
    # (chips.py); no FP8/FP32 model-level row exists to fit a separate factor on.
    compute_efficiency: float = 0.153
    memory_efficiency: float = 0.511
    # The MFU of compiled training graphs (NxD Training's XLA graphs on Trn1) where plan(execution="graph") prices
    # a training step: FITTED on the training table's T1 and T2 only (fidelity/training.py; docs/fidelity.md,
    # "Training"); the serving stack's compute_efficiency above is fitted on serving rows and not used there.
    training_compute_efficiency: float = 0.543
    # A collective inside a compiled graph (TP all-reduce per layer): its fixed cost, replacing the
    # stand-alone nccom-test floor (comm launch_s, 55 us) that the alpha-beta model adds to a collective
    # launched on its own. FITTED on R6's published profile split (collectives ~3 ms per token).
    collective_in_graph_s: float = 23e-6
    # Host work of a serving loop around each graph execution (NxD Inference: input preparation,
    # scheduling, output handling). Derived from R6 (trn2-model-figures.md; NxD Inference contrib
    # DeepSeek-V3 README): TPOT p50 20.5 ms minus its device profile (compute ~12 + collectives ~3 +
    # weight reads ~3 + straggler ~1 = ~19 ms, "100% of TPOT") -> 1.5 ms off the device. Sourced, not fitted.
    serving_step_s: float = 1.5e-3
    # What vLLM adds per step over native NxD Inference. Derived from R6 (trn2-model-figures.md): vLLM
    # synchronous ITL 22.2 ms at batch 1 vs native TPOT p50 20.5 ms -> 1.7 ms. Sourced, not fitted.
    vllm_step_s: float = 1.7e-3
    # Host CPU running one CPU-fallback op (modeled, so a fallback's cost never depends on the laptop
    # or on a first call's warm-up). Assumption: ~100 GFLOP/s f32 for one op on a many-core x86
    # Trn host, ~20 GB/s of memory traffic for one op, 5 µs of framework dispatch.
    host_peak_flops: float = 100e9
    host_memory_bandwidth: float = 20e9
    host_dispatch_s: float = 5e-6


_constants = CostConstants()


def get_cost_constants() -> CostConstants:
    """Return the cost constants in force."""
    return _constants


@contextmanager
def graph_pricing(**changes: float) -> Iterator[CostConstants]:
    """Inside: every eager op is priced as a kernel of one compiled graph (no host dispatch of its own, the
    in-graph kernel dispatch ``kernel_in_graph_s`` instead of an eager launch), with ``changes`` to the other
    constants (e.g. the training stack's efficiencies). Restores the constants on exit. Raises ``TypeError``
    for an unknown constant. Not thread-safe: for a dry run (plan()), whose clocks are its own."""
    global _constants
    saved = _constants
    _constants = replace_fields(
        saved, {"eager_host_dispatch_s": 0.0, "eager_launch_s": saved.kernel_in_graph_s, **changes}, "cost constant(s)"
    )
    try:
        yield _constants
    finally:
        _constants = saved


def set_cost_constants(**changes: float) -> CostConstants:
    """Override cost constants by name; raises ``TypeError`` on an unknown name.

    The constants (:class:`CostConstants`, each commented with its source) are, by provenance:

    * **fitted** (docs/fidelity.md "Model level" names the rows): ``compute_efficiency`` (MFU),
      ``memory_efficiency`` (MBU) and ``collective_in_graph_s``, jointly on the ledger's fit rows (R3,
      R11, R13; ``fidelity.fit.split``) plus R6's published collective split (~3 ms per token), which
      pins the collective floor. The fourth and fifth
      fitted constants are outside this record: ``compiler.compile_time.NEURON_COMPILE_FIXED_S`` and
      ``NEURON_COMPILE_S_PER_INSTRUCTION``, fitted on ViT-L's and Trinity-Mini's batch-1 compile times
      (``fidelity.fit.ALL_FITTED``);
    * **sourced** (derived from published figures): ``serving_step_s`` and ``vllm_step_s`` (both R6),
      ``eager_host_dispatch_s`` + ``eager_launch_s`` (TorchNeuron's ~0.2 ms per eager op);
    * **assumed** (no published figure): ``graph_launch_s``, ``kernel_in_graph_s``, the transfer and
      host-CPU figures.
    """
    global _constants
    _constants = replace_fields(_constants, dict(changes), "cost constant(s)")
    return _constants


def roofline_seconds(chip: ChipSpec, flops: float, nbytes: float, dtype: torch.dtype) -> float:
    """Device time of a kernel doing ``flops`` and moving ``nbytes`` through HBM, without launch cost."""
    peak, bandwidth = roofline_rates(chip, dtype)
    compute = flops / peak
    memory = nbytes / bandwidth
    return compute if compute > memory else memory


_rates: dict[torch.dtype, tuple[float, float]] = {}
_rates_of: list[object] = [None, None]  # the chip and constants the cached rates were computed for
# the cost constants in force (set_cost_constants) and rates cached from them: survive a reset
_state.register("cost_constants", _state.Globals(__name__, "_constants", "_rates", "_rates_of"), reset=False)


def roofline_rates(chip: ChipSpec, dtype: torch.dtype) -> tuple[float, float]:
    """The roofline's divisors for ``dtype``: (peak FLOP/s × MFU, HBM bytes/s × MBU) of one
    logical core; cached until the chip or the cost constants change (the eager hot path reads them)."""
    if _rates_of[0] is not chip or _rates_of[1] is not _constants:
        _rates.clear()
        _rates_of[:] = [chip, _constants]
    rates = _rates.get(dtype)
    if rates is None:
        rates = _rates[dtype] = (
            chip.device_peak_flops(dtype) * _constants.compute_efficiency,
            chip.device_hbm_bandwidth * _constants.memory_efficiency,
        )
    return rates


def kernel_terms(chip: ChipSpec, flops: float, nbytes: float, dtype: torch.dtype) -> tuple[float, float]:
    """The two roofline terms of a kernel at the calibrated efficiencies: (compute s, memory s); the
    kernel takes the larger (:func:`roofline_seconds`). The model-level cost model reads both to say
    whether a kernel's time is compute or weight/KV reads."""
    peak, bandwidth = roofline_rates(chip, dtype)
    return flops / peak, nbytes / bandwidth


def foreach_seconds(chip: ChipSpec, dtype: torch.dtype, args: Sequence[Any], outs: Sequence[Any] | None) -> float:
    """Device time of one fused foreach launch, without launch cost: the sum over the list of each
    element's pointwise roofline (as the per-tensor op would charge it: ~one op per element of the larger
    side, reading element ``i`` of every tensor list plus the tensor arguments, writing ``outs[i]``, or the
    first list for an in-place foreach when ``outs`` is ``None``)."""
    lists = [a for a in args if isinstance(a, list | tuple) and a and isinstance(a[0], torch.Tensor)]
    if not lists:
        return 0.0
    shared = sum(a.nbytes for a in args if isinstance(a, torch.Tensor) and not a.is_cpu)
    written = outs if outs is not None else lists[0]
    peak, bandwidth = roofline_rates(chip, dtype)
    itemsize = dtype.itemsize
    total = 0.0
    for i, out in enumerate(written):
        read = shared
        for tensors in lists:
            read += tensors[i].nbytes
        wrote = out.nbytes if isinstance(out, torch.Tensor) else 0
        compute = (read if read > wrote else wrote) / itemsize / peak
        memory = (read + wrote) / bandwidth
        total += compute if compute > memory else memory
    return total


def transfer_seconds(nbytes: float) -> float:
    """Time of one host<->device copy of ``nbytes``."""
    if nbytes <= 0:
        return 0.0
    c = _constants
    return c.transfer_latency_s + nbytes / c.transfer_bandwidth


def host_flops(name: str, inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> float:
    """Approximate FLOPs of a CPU-fallback op on the host: its record's ``host_flops`` (sorts ``n log n``,
    linear algebra ``2·m·n·k``), else the device estimate (:func:`estimate_flops`)."""
    fn = policy.rule(name).host_flops
    if fn is None:
        return estimate_flops(name, inputs, outputs)
    return fn([t.shape for t in inputs], sum(o.numel() for o in outputs))


def host_compute_seconds(name: str, inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> float:
    """Modeled host time of one CPU-fallback op: dispatch plus a roofline on the host CPU."""
    c = _constants
    nbytes = sum(t.nbytes for t in inputs) + sum(t.nbytes for t in outputs)
    compute = host_flops(name, inputs, outputs) / c.host_peak_flops
    memory = nbytes / c.host_memory_bandwidth
    return c.host_dispatch_s + (compute if compute > memory else memory)


def fallback_seconds(name: str, inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> float:
    """Modeled cost of one CPU fallback: copies device->host and back plus the modeled host compute."""
    in_bytes = sum(t.nbytes for t in inputs)
    out_bytes = sum(t.nbytes for t in outputs)
    return transfer_seconds(in_bytes) + transfer_seconds(out_bytes) + host_compute_seconds(name, inputs, outputs)


def estimate_flops(name: str, inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> float:
    """Approximate FLOPs of op ``name`` (base name): its record's cost function, else one per element."""
    out_numel = sum(o.numel() for o in outputs)
    fn = policy.rule(name).flops
    if fn is not None:
        return fn([t.shape for t in inputs], out_numel)
    in_numel = sum(t.numel() for t in inputs)
    return float(max(out_numel, in_numel))
