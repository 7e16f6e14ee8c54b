"""The session's state in one small dict: device, memory, compile cache and fallbacks.

:func:`status_payload` is what the JupyterLab status bar shows (``StatusPayload`` in
``trn_notebook.magics.status_comm``); :func:`state_snapshot` is the same figures kept up to date
cheaply after every cell (it recomputes only when a version counter moved), for widgets;
:func:`status` is the ``%trn status`` card. Everything here only reads the single sources of truth
(placement log, allocator, compile log); nothing is counted here.
"""

from __future__ import annotations

import sys
from typing import Any

import torch

from .device.config import get_config
from .device.placement import CATEGORY, placement_log
from .device.runtime import allocator, get_chip
from .results import Card, fmt_bytes

_last_key: tuple[Any, ...] | None = None
_last_snapshot: dict[str, Any] | None = None


def _compile_log() -> Any | None:
    """The compiler's compile log if the compiler was imported (no compile happened otherwise)."""
    compiler = sys.modules.get("trn_notebook.compiler")
    return getattr(compiler, "compile_log", None) if compiler is not None else None


def _compile_entries() -> list[dict[str, Any]]:
    log = _compile_log()
    return list(log.snapshot()) if log is not None else []


def current_device() -> str:
    """``"neuron:0"`` when new tensors go to the neuron device by default, else that device (``"cpu"``)."""
    # torch.get_default_device() allocates a tensor to find the index of an index-less default device
    # (which would log an op on every refresh); read the default-device mode directly instead.
    from torch.overrides import _get_current_function_mode_stack
    from torch.utils._device import DeviceContext

    mode = next((m for m in reversed(_get_current_function_mode_stack()) if isinstance(m, DeviceContext)), None)
    dev = torch.device(mode.device) if mode is not None else torch.device("cpu")
    if dev.type in ("privateuseone", "neuron"):
        return f"neuron:{dev.index or 0}"
    return str(dev)


def _cache_counts(entries: list[dict[str, Any]]) -> tuple[int, int]:
    hits = sum(1 for e in entries if str(e.get("cache_result", "")).endswith("hit"))
    misses = sum(1 for e in entries if e.get("cache_result") == "miss")
    return hits, misses


def status_payload() -> dict[str, Any]:
    """The ``StatusPayload`` dict: device label, chip, memory, compile-cache hits/misses, fallback ops."""
    device = current_device()
    chip = get_chip().name
    entries = _compile_entries()
    hits, misses = _cache_counts(entries)
    snap = placement_log.snapshot()
    with allocator.lock:
        allocated, capacity = allocator.counters.allocated, allocator.capacity
    payload: dict[str, Any] = {
        "type": "status",
        "loaded": True,
        "device": device,
        "label": f"{device} {chip} (sim)" if device.startswith("neuron") else device,
        "chip": chip,
        "memory_allocated": int(allocated),
        "memory_capacity": int(capacity),
        "cache_hits": hits,
        "cache_misses": misses,
        "fallback_ops": sum(1 for e in snap.values() if e[CATEGORY] == "cpu_fallback"),
    }
    payload["text"], payload["title"] = status_strings(payload)
    return payload


def status_strings(p: dict[str, Any]) -> tuple[str, str]:
    """The status bar's line and tooltip for payload ``p``, formatted here (the extension formats nothing)."""
    memory = f"{fmt_bytes(p['memory_allocated'])} / {fmt_bytes(p['memory_capacity'])}"
    hits, misses, fallbacks = p["cache_hits"], p["cache_misses"], p["fallback_ops"]
    text = f"{p['label']} · {memory} · cache {hits} hit {misses} miss · fallback {fallbacks}"
    title = "\n".join(
        [
            f"trn-notebook device: {p['label']}",
            f"memory allocated: {memory}",
            f"compile cache: {hits} hits, {misses} misses (a miss is one compiled graph)",
            f"ops that fell back to CPU: {fallbacks} (random numbers, drawn on the host by design, included)",
            "click to run %trn dashboard",
        ]
    )
    return text, title


def _state_key() -> tuple[Any, ...]:
    c = allocator.counters
    log = _compile_log()
    # The compile log's version counter moves on every new record and every run count update.
    n_compiles = -1 if log is None else getattr(getattr(log, "compile_log", log), "version", None)
    if n_compiles is None:
        n_compiles = len(log.snapshot())  # type: ignore[union-attr]
    return (
        placement_log.version,
        c.num_allocs,
        c.num_frees,
        c.reserved,
        allocator.capacity,
        n_compiles,
        get_chip(),
        torch.get_default_device(),
        get_config(),
    )


def state_snapshot(*, force: bool = False) -> tuple[dict[str, Any], bool]:
    """The latest :func:`status_payload` and whether it changed since the previous call.

    Cheap when nothing changed: it compares version counters (placement log, allocator, compile
    log, chip, default device, config) and recomputes only if one moved.
    """
    global _last_key, _last_snapshot
    key = _state_key()
    if not force and key == _last_key and _last_snapshot is not None:
        return _last_snapshot, False
    _last_key, _last_snapshot = key, status_payload()
    return _last_snapshot, True


def status() -> Card:
    """The ``%trn status`` card: device, memory, compile cache and fallbacks in one place."""
    p = status_payload()
    cfg = get_config()
    modes = [name for name, on in (("launch blocking", cfg.launch_blocking), ("eager fusion", cfg.eager_fusion)) if on]
    if cfg.strict:
        modes.append("strict (fallbacks raise)")
    with allocator.lock:
        peak = allocator.counters.peak_allocated
    pct = 100.0 * p["memory_allocated"] / p["memory_capacity"] if p["memory_capacity"] else 0.0
    return Card(
        "trn status",
        [
            ("device", p["label"]),
            ("mode", ", ".join(modes) if modes else "default (async, no eager fusion)"),
            ("memory", f"{fmt_bytes(p['memory_allocated'])} of {fmt_bytes(p['memory_capacity'])} ({pct:.1f}%)"),
            ("peak allocated", fmt_bytes(peak)),
            ("compile cache", f"{p['cache_hits']} hits, {p['cache_misses']} misses"),
            ("fallback ops", f"{p['fallback_ops']} (see %trn ops)"),
        ],
    )
