"""The per-process log of collectives and the exposed (non-overlapped) communication on the device clock."""

from __future__ import annotations

from collections import deque
from dataclasses import asdict, dataclass
from typing import Any

from .. import locks as _locks
from .. import state as _state
from ..device.clocks import clocks
from ..profiling.summary import union_intervals

CAPACITY = 10_000


@dataclass(frozen=True, slots=True)
class CommRecord:
    """One collective as the cost model charged it (modeled seconds on the device clock)."""

    kind: str
    nbytes: int
    world_size: int
    algorithm: str
    fabric: str
    start_s: float
    modeled_s: float
    wall_s: float
    blocking: bool


class CommLog:
    """Bounded log of collectives with ``snapshot()``/``reset()``."""

    def __init__(self) -> None:
        self.lock = _locks.make("leaf", "comm ledger")
        self.records: deque[CommRecord] = deque(maxlen=CAPACITY)

    def record(
        self,
        kind: str,
        nbytes: int,
        world_size: int,
        algorithm: str,
        fabric: str,
        start_s: float,
        modeled_s: float,
        wall_s: float,
        blocking: bool,
    ) -> None:
        """Append one collective."""
        with self.lock:
            self.records.append(
                CommRecord(kind, nbytes, world_size, algorithm, fabric, start_s, modeled_s, wall_s, blocking)
            )

    def snapshot(self) -> list[dict[str, Any]]:
        """The logged collectives as dicts, oldest first."""
        with self.lock:
            return [asdict(r) for r in self.records]

    def reset(self) -> None:
        """Forget every logged collective."""
        with self.lock:
            self.records.clear()

    def summary(self) -> dict[str, float | int]:
        """Totals: collectives, bytes, modeled communication seconds and its exposed part (see :func:`exposed_comm`)."""
        recs = self.snapshot()
        comm, exposed = exposed_comm()
        return {
            "collectives": len(recs),
            "comm_bytes": sum(r["nbytes"] for r in recs),
            "comm_s": comm,
            "exposed_comm_s": exposed,
        }


def exposed_comm(since_s: float = 0.0) -> tuple[float, float]:
    """``(communication seconds, exposed seconds)`` on the modeled device clock since ``since_s``.

    Exposed = time the communication queue is busy while the compute queue is idle (comm not hidden
    behind compute), from the clocks' event timeline.
    """
    events = [e for e in clocks.state.events.snapshot() if e.end_s > since_s]
    comm = union_intervals([(max(e.start_s, since_s), e.end_s) for e in events if e.kind == "comm"], keep_empty=False)
    compute = union_intervals([(max(e.start_s, since_s), e.end_s) for e in events if e.lane.device], keep_empty=False)
    total = sum(b - a for a, b in comm)
    overlap = 0.0
    j = 0
    for a, b in comm:
        while j < len(compute) and compute[j][1] <= a:
            j += 1
        k = j
        while k < len(compute) and compute[k][0] < b:
            overlap += min(b, compute[k][1]) - max(a, compute[k][0])
            k += 1
    return total, total - overlap


comm_log = CommLog()
_state.register("comm_log", comm_log)
