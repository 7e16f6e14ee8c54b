"""The timeline's lanes, declared once (issue 29 item 4).

Every trace we build or read names its lanes from :data:`LANES`: the clock's own Chrome trace
(:meth:`~..clocks.Clocks.chrome_trace`, what ``trn_notebook.save_trace`` writes and each rank of the
rank pool sends), the profiler's merged trace (:mod:`trn_notebook.profiling.merge`), its summary, the
timeline widget and the rank pool's merged trace. A lane is matched by its thread id (``tid``), never
by its label; the label is only what a trace viewer shows. A clock event's kind (``"op"``, ``"graph"``,
``"host"``, ``"comm"``, ``"sync"``) is its lane's key.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Lane:
    """One lane of the timeline: its key (a clock event's kind), thread id, label and whether its events
    are modeled device work (the busy time of the device)."""

    key: str
    tid: int
    label: str
    device: bool = False


LANES: tuple[Lane, ...] = (
    Lane("host", 1, "host (modeled)"),
    Lane("op", 2, "device: eager ops", device=True),
    Lane("graph", 3, "device: compiled graphs", device=True),
    Lane("kernel", 4, "device: kernels in graphs"),
    Lane("transfer", 5, "transfers (DMA)"),
    Lane("sync", 6, "syncs"),
    Lane("fallback", 7, "CPU fallbacks"),
    Lane("compile", 8, "compile (host, wall s)"),
    Lane("comm", 9, "collectives (modeled)"),
)
BY_KEY: dict[str, Lane] = {lane.key: lane for lane in LANES}
BY_TID: dict[int, Lane] = {lane.tid: lane for lane in LANES}


def lane(key: str) -> Lane:
    """The lane named ``key``. Raises ``KeyError`` naming the known keys for any other."""
    try:
        return BY_KEY[key]
    except KeyError:
        raise KeyError(f"no timeline lane {key!r}; lanes: {', '.join(BY_KEY)}") from None


def thread_names(pid: int | str, lanes: tuple[Lane, ...] = LANES) -> list[dict[str, object]]:
    """Chrome-trace ``thread_name`` metadata events naming ``lanes`` in process ``pid``."""
    return [{"name": "thread_name", "ph": "M", "pid": pid, "tid": ln.tid, "args": {"name": ln.label}} for ln in lanes]
