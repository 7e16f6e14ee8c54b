"""Eager accounting off the hot path (issue 33 item 2): per-op records appended, folded when read.

An eager op used to update the clocks (host dispatch, the device queue, the event timeline) and its
placement-log entry as it ran, ~7 µs of Python per op inside the op's own path. In the common case
(no profiler observing the clocks, no ``NEURON_LAUNCH_BLOCKING``, no adaptive fusion, an op whose
placement entry already exists, so no source line to capture) the op now appends one record to
:data:`pending` instead:

* ``(name, device_s, wall_s, host_s)`` for a native op: the modeled device time with its launch, the
  wall seconds of its host work and the modeled host dispatch, all computed at op time from the cost
  constants then in force;
* ``(name, None, wall_s, None)`` for a host-only view op.

:func:`flush` folds the records, in order, through the very same :meth:`Clocks.launch` and
:meth:`PlacementLog._record` the immediate path calls, so the clocks, the timeline and the placement log
end up exactly as if each op had charged itself. Every reader and every other writer of the clocks or
the placement log flushes first (their ``state``/``entries`` properties and their methods do), and the
buffer is folded whenever it holds :data:`CAPACITY` records, so it stays small. Nothing here is a figure
of its own: the records are the clocks' and the placement log's, not yet added.
"""

from __future__ import annotations

from typing import Any

from ... import state as _state
from ..clocks import clocks
from ..placement import placement_log

CAPACITY = 2_048  # records held before a fold (bounded memory, ~0.1 ms of folding)

pending: list[tuple[str, Any, float, Any]] = []
"""The records not yet folded (appended by the op path; a list, appended to atomically under the GIL)."""

append = pending.append


def flush() -> None:
    """Fold the pending records into the clocks and the placement log, oldest first."""
    if not pending:
        return
    launch = clocks.launch
    record = placement_log._record
    with clocks.lock:
        n = len(pending)
        batch = pending[:n]
        del pending[:n]  # records another thread appends meanwhile stay for the next fold
        for name, device_s, wall_s, host_s in batch:
            if host_s is None:
                record(name, "host_only", wall_s, 0.0)
            else:
                launch(name, device_s, host_s, wall_s, fold_pending=False)
                record(name, "native", wall_s, device_s)


def deferrable(name: str) -> bool:
    """Whether an eager op named ``name`` may append a record now instead of charging itself: no observer,
    and its placement entry exists (its first call captured its source line)."""
    return clocks._observer is None and name in placement_log._entries


clocks.drain = placement_log.drain = flush
clocks.pending = placement_log.pending = pending
# folded, never dropped, by the clocks' and the placement log's own resets (both drain first)
_state.register("eager_records", _state.Globals(__name__, "pending"), reset=False)
