"""``torch.neuron``: the device module, mirroring TorchNeuron's (CUDA-style) functions."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from ..display.format import fmt_bytes as _fmt
from .clocks import clocks
from .dry.session import active as dry_active
from .eager.dispatch import record_sync
from .memory.allocator import CachingAllocator
from .memory.runtime import allocator, get_chip, state
from .streams import Event, Stream, current_stream, default_stream, set_stream, stream  # noqa: F401 - torch.neuron API


def is_available() -> bool:
    """True: the simulator is always available."""
    return True


def is_initialized() -> bool:
    """True once registered."""
    return True


def _is_in_bad_fork() -> bool:
    return False


def device_count() -> int:
    """Number of ``neuron`` devices this process can use: 1. One NeuronCore per process, as on
    TorchNeuron (start one process per core with torchrun); the chip's core count is in
    :func:`get_device_properties` (``logical_cores``)."""
    return 1


def current_device() -> int:
    """Index of the current device."""
    return state.current_device


def _check_index(index: int) -> int:
    if index != 0:
        from .eager.kernels import ONE_DEVICE

        valid = (
            ""
            if 0 <= index < get_chip().logical_cores
            else f" (invalid neuron device index: the chip has {get_chip().logical_cores} cores)"
        )
        raise RuntimeError(f"neuron:{index} is not available in this process{valid}: {ONE_DEVICE}")
    return index


def set_device(device: int | str | torch.device) -> None:
    """Select the current device; raises ``RuntimeError`` for an index out of range.

    The simulator computes every device on one memory pool; the index is recorded for tensors'
    ``.device`` and guards, like on the real backend.
    """
    index = device if isinstance(device, int) else (torch.device(device).index or 0)
    state.current_device = _check_index(index)


class device:
    """Context manager that changes the current device (``with torch.neuron.device(0): ...``)."""

    def __init__(self, device: int | str | torch.device | None) -> None:
        self.idx = -1 if device is None else (device if isinstance(device, int) else torch.device(device).index or 0)
        self.prev = -1

    def __enter__(self) -> None:
        if self.idx >= 0:
            self.prev = state.current_device
            set_device(self.idx)

    def __exit__(self, *exc: object) -> None:
        if self.idx >= 0:
            state.current_device = self.prev


def get_device_name(device: int | None = None) -> str:
    """Name of the device, e.g. ``"Trainium2 NeuronCore (simulated)"``."""
    return f"{get_chip().long_name} NeuronCore (simulated)"


def get_device_properties(device: int | None = None) -> Any:
    """Properties of the device: name, chip, cores, HBM capacity/bandwidth, peak TFLOPS by dtype."""
    from types import SimpleNamespace

    chip = get_chip()
    return SimpleNamespace(
        name=get_device_name(device),
        chip=chip.name,
        total_memory=allocator.capacity,
        hbm_bandwidth=chip.device_hbm_bandwidth,
        logical_cores=chip.logical_cores,
        physical_cores=chip.physical_cores,
        tflops_bf16=chip.tflops_bf16 / chip.logical_cores,
        tflops_fp32=chip.tflops_fp32 / chip.logical_cores,
        sbuf_bytes=chip.sbuf_bytes_per_core,
        psum_bytes=chip.psum_bytes_per_core,
        simulated=True,
    )


def synchronize(device: int | None = None) -> None:
    """Wait for the device queue (a sync point on the timeline)."""
    record_sync("torch.neuron.synchronize()")


# -- RNG: the simulator draws random numbers with the host generator (TorchNeuron: an NKI kernel on GpSimd) --
def manual_seed(seed: int) -> None:
    """Seed the generator used by random ops on the device (the host generator)."""
    torch.default_generator.manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    """Seed every device's generator (one shared host generator; ``torch.manual_seed`` calls this)."""
    torch.default_generator.manual_seed(seed)


def seed() -> None:
    """Seed with a random number."""
    torch.seed()


def initial_seed() -> int:
    """The initial seed of the generator."""
    return torch.initial_seed()


def get_rng_state(device: int | str | None = None) -> torch.Tensor:
    """State of the generator used by random ops on the device."""
    return torch.get_rng_state()


def set_rng_state(new_state: torch.Tensor, device: int | str | None = None) -> None:
    """Restore a state from :func:`get_rng_state`."""
    torch.set_rng_state(new_state)


# -- memory -------------------------------------------------------------------------------------
def _memory() -> CachingAllocator:
    """The allocator the memory functions read and reset: inside a dry run (in this thread) its shape-only
    allocator, whose figures are the run's; otherwise the device's. A dry run never touches the real one."""
    session = dry_active()
    return allocator if session is None else session.allocator


def memory_allocated(device: int | None = None) -> int:
    """Bytes in live blocks (rounded sizes)."""
    return _memory().counters.allocated


def max_memory_allocated(device: int | None = None) -> int:
    """Peak of :func:`memory_allocated` since start or the last reset."""
    return _memory().counters.peak_allocated


def memory_reserved(device: int | None = None) -> int:
    """Bytes in segments held by the caching allocator."""
    return _memory().counters.reserved


def max_memory_reserved(device: int | None = None) -> int:
    """Peak of :func:`memory_reserved`."""
    return _memory().counters.peak_reserved


def memory_stats(device: int | None = None) -> dict[str, int]:
    """CUDA-style memory statistics (``allocated_bytes.all.current`` …, ``num_ooms``)."""
    mem = _memory()
    with mem.section:
        c = mem.counters
        return {
            "allocated_bytes.all.current": c.allocated,
            "allocated_bytes.all.peak": c.peak_allocated,
            "active_bytes.all.current": c.active,
            "active_bytes.all.peak": c.peak_active,
            "reserved_bytes.all.current": c.reserved,
            "reserved_bytes.all.peak": c.peak_reserved,
            "allocation.all.current": c.num_allocs - c.num_frees,
            "num_alloc_retries": c.num_alloc_retries,
            "num_ooms": c.num_ooms,
            "num_device_alloc": c.num_segments,
            "num_device_free": c.num_segment_frees,
            "segment.all.current": c.num_segments - c.num_segment_frees,
            "capacity_bytes": mem.capacity,
        }


def memory_summary(device: int | None = None, abbreviated: bool = False) -> str:
    """A text table of the memory counters, with peaks per named phase."""
    s = memory_stats(device)
    mem = _memory()
    lines = [
        f"neuron:{state.current_device} memory ({get_device_name()}{', dry run: modeled' if mem is not allocator else ''}, "
        f"capacity {_fmt(mem.capacity)})",
        f"{'metric':<12}{'current':>14}{'peak':>14}",
    ]
    for key in ("allocated", "active", "reserved"):
        cur, peak = s[f"{key}_bytes.all.current"], s[f"{key}_bytes.all.peak"]
        lines.append(f"{key:<12}{_fmt(cur):>14}{_fmt(peak):>14}")
    lines.append(
        f"alloc retries: {s['num_alloc_retries']}   OOMs: {s['num_ooms']}   segments: {s['segment.all.current']}"
    )
    if not abbreviated and mem.phase_peaks:
        lines.append("peaks by phase (allocated / active / reserved):")
        for phase, p in mem.phase_peaks.items():
            lines.append(f"  {phase:<12}{_fmt(p['allocated']):>12}{_fmt(p['active']):>12}{_fmt(p['reserved']):>12}")
    return "\n".join(lines)


def reset_peak_memory_stats(device: int | None = None) -> None:
    """Reset the peaks (global and per phase) to current values."""
    _memory().reset_peaks()


def reset_accumulated_memory_stats(device: int | None = None) -> None:
    """Zero the event counts (allocation and segment counts, retries, OOMs) as ``torch.cuda``'s does; current
    and peak bytes are kept."""
    _memory().reset_accumulated()


def empty_cache() -> None:
    """Release cached segments that hold no live tensor (reserved drops; allocated does not)."""
    _memory().empty_cache()


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Attribute memory peaks inside the block to phase ``name``."""
    with _memory().phase_scope(name):
        yield


def elapsed_modeled_device_time() -> float:
    """Modeled device busy time so far, seconds."""
    return float(clocks.snapshot().sim_device_s)


def get_amp_supported_dtype() -> list[torch.dtype]:
    """Dtypes ``torch.autocast("neuron", dtype=...)`` accepts (TorchNeuron: float16, bfloat16, float32)."""
    return [torch.bfloat16, torch.float16, torch.float32]
