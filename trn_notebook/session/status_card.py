"""The ``%trn status`` card: the read layer's status figures (:mod:`trn_notebook.facts.status`) rendered."""

from __future__ import annotations

from .. import facts
from ..device.config import get_config
from ..display.format import fmt_pct
from ..display.results import Card, fmt_bytes
from ..facts.base import NA
from ..facts.status import status_payload


def status() -> Card:
    """The ``%trn status`` card: device, memory, compile cache and fallbacks in one place."""
    backend = facts.current()
    p = status_payload()
    memory = backend.memory_snapshot()
    if backend.is_simulator:
        cfg = get_config()
        modes = [n for n, on in (("launch blocking", cfg.launch_blocking), ("eager fusion", cfg.eager_fusion)) if on]
        if cfg.strict:
            modes.append("strict (fallbacks raise)")
        mode = ", ".join(modes) if modes else "default (async, no eager fusion)"
    else:
        mode = f"{backend.name} (simulator modes n/a)"
    capacity = p["memory_capacity"]
    pct = f" ({fmt_pct(p['memory_allocated'], capacity)})" if capacity else ""
    return Card(
        "trn status",
        [
            ("device", p["label"]),
            ("backend", backend.name),
            ("mode", mode),
            ("memory", f"{fmt_bytes(p['memory_allocated'])} of {fmt_bytes(capacity) if capacity else NA}{pct}"),
            ("peak allocated", fmt_bytes(memory.counters.peak_allocated)),
            ("compile cache", f"{p['cache_hits']} hits, {p['cache_misses']} misses"),
            ("fallback ops", f"{p['fallback_ops']} (see %trn ops)"),
            *_numerics_rows(),
        ],
    )


def _numerics_rows() -> list[tuple[str, str]]:
    """The numerics mode and, one row each, the parts of the policy the Neuron docs do not publish."""
    from ..device.numerics.policy import numerics_policy

    policy = numerics_policy()
    rows = [("numerics", policy.label())]
    rows += [("numerics (assumed)", item) for item in policy.assumed()]
    return rows
