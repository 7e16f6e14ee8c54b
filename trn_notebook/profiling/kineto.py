"""Kineto's device-event schema for the modeled lanes: what HolisticTraceAnalysis and TensorBoard read.

Kineto (CUDA, MTIA, PrivateUse1 plugins) marks device work by event args, not by process names:

* a device kernel is an ``X`` event with ``args.stream`` (>= 0) and ``args.correlation``; memory
  copies have category ``gpu_memcpy`` and a name starting ``Memcpy`` (HTA's memory-kernel rule);
* the host event that launched it (``cudaLaunchKernel`` for CUDA, category ``privateuse1_runtime``
  here) carries the same ``correlation``; both carry the launching ``cpu_op``'s ``External id``;
* an ``ac2g`` flow (id = correlation) runs from the launch to the kernel;
* the trace's top-level ``deviceProperties`` lists the devices, ``distributedInfo`` the rank.

Here the launches are the *modeled* host dispatches of the ``host (modeled)`` lane, so a kernel and
its launch are on one clock (the simulator's): HTA's idle-time split (host wait vs kernel wait)
compares modeled host time with modeled device time. The wall-clock ``cpu_op`` that issued the launch
is linked by ``External id`` and by the ``neuron_flow`` arrow. Compiled graphs are device-side
ranges (``gpu_user_annotation``) around their kernels, which share the graph launch's correlation
(as the kernels of a CUDA graph share ``cudaGraphLaunch``'s).
"""

from __future__ import annotations

from typing import Any

STREAM_COMPUTE = 1
"""The modeled compute queue: eager ops, graph kernels (one after another, never overlapping)."""
STREAM_DMA = 2
"""Host<->device copies (the host waits for them in the model)."""
STREAM_COMM = 3
"""The modeled communication queue: collectives, overlapping compute until a sync (device/clocks.py)."""
DEVICE = 0
CORRELATION_BASE = 1 << 36
"""First correlation id; far above the small ids Kineto hands out for its own activities."""
CAT_KERNEL = "kernel"
CAT_MEMCPY = "gpu_memcpy"
CAT_RUNTIME = "privateuse1_runtime"
CAT_GRAPH = "gpu_user_annotation"
CAT_FLOW = "ac2g"
TRACE_SEPARATORS = (",", ": ")
"""JSON separators of written traces: compact, but ``"rank": N`` keeps the space HTA's rank lookup needs."""
FIGURES_NOTE = (
    "modeled: one logical NeuronCore's share of the chip's published figures (device/chips.py, from "
    "torchneuron.md Hardware table); not read from hardware"
)


def device_args(args: dict[str, Any], stream: int, correlation: int, external_id: Any) -> dict[str, Any]:
    """``args`` (changed and returned) with Kineto's device-kernel fields."""
    args["device"] = DEVICE
    args["stream"] = stream
    args["correlation"] = correlation
    if external_id is not None:
        args["External id"] = external_id
    return args


def runtime_event(name: str, ts: float, dur: float, tid: int, pid: int, correlation: int, external_id: Any,
                  extra: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    """The modeled host launch of a device event (Kineto's runtime-API event)."""
    args: dict[str, Any] = {"correlation": correlation, **(extra or {})}
    if external_id is not None:
        args["External id"] = external_id
    return {"ph": "X", "name": name, "cat": CAT_RUNTIME, "ts": ts, "dur": max(0.0, dur), "pid": pid, "tid": tid,
            "args": args}  # fmt: skip


def flow(correlation: int, launch: dict[str, Any], device_event: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``ac2g`` arrow from a launch to its (first) device event."""
    common = {"id": correlation, "name": CAT_FLOW, "cat": CAT_FLOW}
    return [
        {"ph": "s", **common, "ts": launch["ts"], "pid": launch["pid"], "tid": launch["tid"]},
        {"ph": "f", "bp": "e", **common, "ts": device_event["ts"], "pid": device_event["pid"],
         "tid": device_event["tid"]},
    ]  # fmt: skip


def device_properties(chip_name: str) -> dict[str, Any]:
    """The ``deviceProperties`` entry of ``neuron:0`` (figures of the modeled chip, marked as such)."""
    from ..device.chips import CHIPS

    chip = CHIPS.get(chip_name)
    entry: dict[str, Any] = {"id": DEVICE, "name": "neuron:0 (modeled)", "backend": "neuron (simulated)"}
    if chip is None:
        entry["figures"] = f"missing: no chip model named {chip_name!r}"
        return entry
    cores = chip.logical_cores
    entry.update(
        {
            "name": f"neuron:0 (modeled {chip.long_name} logical NeuronCore)",
            "totalGlobalMem": chip.device_hbm_bytes,
            "hbmBandwidthBytesPerSec": chip.device_hbm_bandwidth,
            "peakTflopsBf16": chip.tflops_bf16 / cores,
            "peakTflopsFp32": chip.tflops_fp32 / cores,
            "sbufBytes": chip.sbuf_bytes_per_core,
            "psumBytes": chip.psum_bytes_per_core,
            "figures": FIGURES_NOTE,
        }
    )
    return entry


def distributed_info() -> dict[str, Any] | None:
    """``distributedInfo`` of this process when ``torch.distributed`` is initialized (else None)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return None
    return {"backend": str(dist.get_backend()), "rank": dist.get_rank(), "world_size": dist.get_world_size()}


def add_metadata(trace: dict[str, Any], chip_name: str) -> None:
    """Add ``deviceProperties`` (neuron:0) and, on a rank, ``distributedInfo`` to a trace (in place).

    Keeps what Kineto already wrote: other devices' entries, and torch.profiler's own distributedInfo.
    """
    props = trace.get("deviceProperties")
    if not isinstance(props, list):
        props = trace["deviceProperties"] = []
    if not any(isinstance(p, dict) and str(p.get("name", "")).startswith("neuron:") for p in props):
        props.append(device_properties(chip_name))
    if "distributedInfo" not in trace:
        info = distributed_info()
        if info is not None:
            trace["distributedInfo"] = info
