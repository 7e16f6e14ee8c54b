"""The session's state in one small dict: device, memory, compile cache and fallbacks.

:func:`status_payload` is what the JupyterLab status bar shows (:class:`StatusPayload`);
:func:`state_snapshot` is the same figures kept up to date cheaply after every cell (it recomputes only
when a version counter moved), for widgets; the ``%trn status`` card (:func:`trn_notebook.session.status_card.status`)
renders them. This module is part of the read layer (issue 29 item 1). Everything is read through the live backend
(:func:`trn_notebook.facts.current`: the simulator, or TorchNeuron on a Trn2, where figures it does
not measure read "n/a"); nothing is counted here beyond the compile records' cache results.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Literal, TypedDict

import torch

from .. import facts
from .. import state as _state
from ..device.config import get_config
from ..device.memory.runtime import get_chip
from ..display.format import fmt_bytes, fmt_compile, fmt_compile_brief
from .base import NA


class StatusPayload(TypedDict):
    """What the status-bar item shows; one message per change."""

    type: Literal["status"]
    loaded: Literal[True]
    device: str  # "neuron:0" or "cpu"
    label: str  # "neuron:0 trn2 (sim)", "neuron:0 Trainium2 (TorchNeuron)" or "cpu"
    chip: str  # "trn2" (the simulator's chip model) or the hardware device's name
    memory_allocated: int  # bytes
    memory_capacity: int  # bytes (0: not reported)
    cache_hits: int | str  # "n/a" on hardware: TorchNeuron's metrics do not say whether the NEFF cache hit
    cache_misses: int | str
    fallback_ops: int
    compile_s: float  # measured: our compiler's wall seconds over the compile records (0.0: none yet)
    modeled_compile_s: float | None  # modeled Neuron compile seconds of the misses (None: no record says)
    compile_text: str  # both, formatted by the kernel (display.format.fmt_compile); "" before any compile
    text: str  # the status-bar line, formatted by the kernel (trn_notebook.display.format)
    title: str  # its tooltip, formatted by the kernel


class StatusError(TypedDict):
    """Sent instead of a status when ``payload_fn`` raised, so the item can say so."""

    type: Literal["error"]
    loaded: Literal[True]
    message: str


_last_key: tuple[Any, ...] | None = None
_last_snapshot: dict[str, Any] | None = None
_state.register("status_cache", _state.Globals(__name__, "_last_key", "_last_snapshot"))


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


def compile_seconds(backend: facts.Backend) -> tuple[float, float | None]:
    """Our compiler's measured compile seconds over the backend's compile records (0.0 before any) and the
    modeled Neuron compile seconds of the misses (``CompileSummary.modeled_neuron_s``; None: no record says)."""
    summary = backend.compile_summary()
    if summary is None:
        return 0.0, None
    return float(summary.compile_s), summary.modeled_neuron_s


def cache_counts(backend: facts.Backend) -> tuple[int | str, int | str]:
    """Compile-cache hits and misses from the backend's one compile summary; NA on hardware, whose
    records carry no cache result (TorchNeuron's dynamo metrics do not say whether the NEFF cache hit)."""
    summary = backend.compile_summary()
    if summary is None:
        return (0, 0) if backend.is_simulator else (NA, NA)  # the simulator before its compiler loads: none
    return (summary.hits, summary.misses) if summary.known else (NA, NA)


def chip_label(backend: facts.Backend | None = None) -> str:
    """``trn2`` (the simulator's chip model) or the hardware device's name (``Trainium2``)."""
    backend = facts.current() if backend is None else backend
    if backend.is_simulator:
        return get_chip().name
    return str(backend.device_properties().get("name", NA))


def status_payload() -> dict[str, Any]:
    """The ``StatusPayload`` dict: device label, chip, memory, compile-cache hits/misses, fallback ops."""
    backend = facts.current()
    device = current_device()
    chip = chip_label(backend)
    hits, misses = cache_counts(backend)
    compile_s, modeled_compile_s = compile_seconds(backend)
    memory = backend.memory_snapshot()
    suffix = "(sim)" if backend.is_simulator else "(TorchNeuron)"
    payload: dict[str, Any] = {
        "type": "status",
        "loaded": True,
        "device": device,
        "label": f"{device} {chip} {suffix}" if device.startswith("neuron") else device,
        "chip": chip,
        "memory_allocated": int(memory.counters.allocated),
        "memory_capacity": int(memory.capacity),
        "cache_hits": hits,
        "cache_misses": misses,
        "fallback_ops": len(backend.placement().fallback_ops),
        "compile_s": compile_s,
        "modeled_compile_s": modeled_compile_s,
        "compile_text": compiled_text(compile_s, modeled_compile_s),
    }
    payload["text"], payload["title"] = status_strings(payload)
    return payload


def compiled_text(compile_s: float, modeled_s: float | None) -> str:
    """The payload's ``compile_text``: measured beside modeled (:func:`display.format.fmt_compile`), or ``""``
    before anything compiled."""
    return fmt_compile(compile_s, modeled_s) if compile_s or modeled_s is not None else ""


def status_strings(p: dict[str, Any]) -> tuple[str, str]:
    """The status bar's line and tooltip for payload ``p``, formatted here (the extension formats nothing).

    Once something compiled, the line ends with the modeled Neuron compile (``modeled compile 3.9 min``) and
    the tooltip shows it beside our measured compile (:func:`display.format.fmt_compile`), saying what each is
    and where the modeled one's constant comes from."""
    capacity = fmt_bytes(p["memory_capacity"]) if p["memory_capacity"] else NA
    memory = f"{fmt_bytes(p['memory_allocated'])} / {capacity}"
    hits, misses, fallbacks = p["cache_hits"], p["cache_misses"], p["fallback_ops"]
    cache = f"cache {hits} hit {misses} miss" if hits != NA else f"cache {NA}"
    compiled = bool(p.get("compile_text"))
    brief = fmt_compile_brief(p.get("compile_s") or 0.0, p.get("modeled_compile_s"))
    text = f"{p['label']} · {memory} · {cache} · fallback {fallbacks}" + (f" · {brief}" if compiled else "")
    title = "\n".join(
        [
            f"trn-notebook device: {p['label']}",
            f"memory allocated: {memory}",
            f"compile cache: {hits} hits, {misses} misses (a miss is one compiled graph)"
            if hits != NA
            else f"compile cache: hits and misses {NA} (the live backend's compile records carry no cache result)",
            f"compile: {p['compile_text']} {_compile_sources(p)}" if compiled else "compile: nothing compiled yet",
            f"ops that fell back to CPU: {fallbacks} (random numbers, drawn on the host by the simulator, included)",
            "click to run %trn dashboard",
        ]
    )
    return text, title


def _compile_sources(p: dict[str, Any]) -> str:
    """What the tooltip's compile figures are, and where the modeled one's constant comes from."""
    measured = "measured: our compiler's wall time on this machine"
    if p.get("modeled_compile_s") is None:
        return f"({measured}; modeled: n/a, no compile record carries an instruction count)"
    # A modeled figure means our compiler counted the instructions: it is loaded, so this import is free.
    from ..compiler.compile_time import DERIVED_FROM

    return (
        f"({measured}; modeled: the Neuron compiler's time for the missed graphs from their instruction "
        f"counts and a fixed part per graph, both fitted on {DERIVED_FROM})"
    )


def _state_key() -> tuple[Any, ...] | None:
    """Version counters of everything the payload reads; None when the backend has none (re-read)."""
    backend = facts.current()
    versions: list[Hashable | None] = [
        backend.placement_version(), backend.memory_version(), backend.compile_version(),
    ]  # fmt: skip
    if any(v is None for v in versions):
        return None
    from ..device.numerics.policy import numerics

    # current_device() allocates nothing
    return (*versions, get_chip(), current_device(), get_config(), numerics.policy)


def state_snapshot(*, force: bool = False) -> tuple[dict[str, Any], bool]:
    """The latest :func:`status_payload` and whether it changed since the previous call.

    Cheap when nothing changed: it compares version counters (placement log, allocator, compile
    log, chip, default device, config) and recomputes only if one moved. A backend without version
    counters (TorchNeuron) is re-read and compared by value.
    """
    global _last_key, _last_snapshot
    key = _state_key()
    if not force and key is not None and key == _last_key and _last_snapshot is not None:
        return _last_snapshot, False
    payload = status_payload()
    if key is None and not force and payload == _last_snapshot and _last_snapshot is not None:
        return _last_snapshot, False
    _last_key, _last_snapshot = key, payload
    return _last_snapshot, True
