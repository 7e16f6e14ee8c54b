"""The simulator's timeline events, one typed record (issue 29 item 4: one trace model).

An :class:`Event` is what every timeline reader sees: its kind (the key of its lane in
:data:`~.lanes.LANES`, so ``event.lane`` is matched by id, never by label), name, modeled start and
duration, the modeled host clock when it was issued, the bytes it moved and the user's source line
(:class:`~..source_lines.SourceLine`, ``None`` where nobody looked it up). The clock's bounded ring
(:class:`~..clocks.EventRing`) returns them for the clock's Chrome trace and the distributed ledger; the
profiler's recorder keeps one per record, with a source line, for its merged trace.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from ..source_lines import SourceLine
from .lanes import BY_KEY, Lane


class Event(NamedTuple):
    """One timeline event (seconds on the modeled clocks)."""

    kind: str
    name: str
    start_s: float
    duration_s: float
    host_s: float = 0.0  # modeled host clock when it was issued (after its dispatch)
    nbytes: int = 0  # bytes it moved between host and device (transfers and fallbacks)
    source: SourceLine | None = None

    @property
    def lane(self) -> Lane:
        """The lane this event is drawn on (by its kind)."""
        return BY_KEY[self.kind]

    @property
    def end_s(self) -> float:
        """Modeled end: start plus duration."""
        return self.start_s + self.duration_s


def moved_bytes(detail: Any) -> int:
    """Bytes a host-side event moved, from its clock detail (``h2d`` plus ``d2h``; 0 for anything else)."""
    if not isinstance(detail, Mapping):
        return 0
    return int(detail.get("h2d", 0)) + int(detail.get("d2h", 0))
