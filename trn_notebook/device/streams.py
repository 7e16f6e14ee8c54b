"""``torch.neuron.Stream`` / ``Event``: CUDA-style streams and events on the modeled device clock.

The simulated NeuronCore runs one kernel at a time, so compute issued on any stream goes to the one
compute queue of :mod:`.clocks`; collectives go to the communication queue. A stream's *tail* is the
later of the compute queue's end and the end of the last collective issued while it was current.
``Event.record`` stamps a stream's tail; ``Stream.wait_event`` on the compute side makes the compute
queue wait for that time (this is how exposed communication appears on the clock);
``Event.elapsed_time`` returns modeled milliseconds. Data never races: the simulator computes eagerly.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from .. import state as _state
from .clocks import clocks


class Stream:
    """A modeled device stream (``torch.neuron.Stream(priority=0)``); see the module docstring."""

    def __init__(self, device: Any = None, priority: int = 0, **kwargs: Any) -> None:
        self.priority = priority
        self.comm_tail_s = 0.0

    @property
    def device(self) -> torch.device:
        """The stream's device (``neuron:0``)."""
        return torch.device("neuron", 0)

    def tail_s(self) -> float:
        """Modeled time when the work issued on this stream so far is done."""
        st = clocks.state
        # A tail later than the comm queue itself is stale (the clocks were reset since).
        return max(st.device_free_at_s, min(self.comm_tail_s, st.comm_free_at_s))

    def record_event(self, event: Event | None = None) -> Event:
        """Record (a new, or the given) event at this stream's tail; returns it."""
        event = event or Event()
        event.record(self)
        return event

    def wait_event(self, event: Event) -> None:
        """Work issued later on this stream starts after ``event`` (the compute queue waits for it)."""
        clocks.wait_until(event.time_s)

    def wait_stream(self, stream: Stream) -> None:
        """Work issued later on this stream starts after everything issued on ``stream`` so far."""
        clocks.wait_until(stream.tail_s())

    def query(self) -> bool:
        """True: the simulator has computed everything already (modeled time lives on the clock)."""
        return True

    def synchronize(self) -> None:
        """The host waits for this stream (a sync point on the timeline)."""
        clocks.sync("Stream.synchronize()")

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        return f"<torch.neuron.Stream device=neuron:0 priority={self.priority} at {id(self):#x}>"


class Event:
    """A modeled event: ``Event(enable_timing=True)``, ``record``, ``elapsed_time`` (ms), ``wait``."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        self.enable_timing = enable_timing
        self.time_s = 0.0
        self.recorded = False

    def record(self, stream: Stream | None = None) -> Event:
        """Stamp the tail of ``stream`` (default: the current stream); returns self."""
        self.time_s = (stream or current_stream()).tail_s()
        self.recorded = True
        return self

    def wait(self, stream: Stream | None = None) -> None:
        """Make ``stream`` (default: current) wait for this event."""
        (stream or current_stream()).wait_event(self)

    def query(self) -> bool:
        """True (work is computed eagerly; modeled time lives on the clock)."""
        return True

    def synchronize(self) -> None:
        """The host waits until this event (a sync point)."""
        clocks.sync("Event.synchronize()")

    def elapsed_time(self, end_event: Event) -> float:
        """Modeled milliseconds from this event to ``end_event``.

        Raises ``RuntimeError`` (as CUDA does) unless both events were created with
        ``enable_timing=True`` and recorded.
        """
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if not (self.recorded and end_event.recorded):
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return (end_event.time_s - self.time_s) * 1e3


_default = Stream()
_local = threading.local()
# the default stream and each thread's current stream: a reset keeps streams (the clocks restart)
_state.register("streams", _state.Globals(__name__, "_default", "_local"), reset=False)


def default_stream(device: Any = None) -> Stream:
    """The default stream of the device."""
    return _default


def current_stream(device: Any = None) -> Stream:
    """The stream current in this thread (the default stream unless inside ``torch.neuron.stream(s)``)."""
    return getattr(_local, "stream", None) or _default


def set_stream(stream: Stream) -> None:
    """Make ``stream`` current in this thread."""
    _local.stream = stream


@contextmanager
def stream(s: Stream | None) -> Iterator[None]:
    """Context manager: ``s`` is the current stream inside the block (``None``: no change)."""
    if s is None:
        yield
        return
    previous = current_stream()
    set_stream(s)
    try:
        yield
    finally:
        set_stream(previous)


def note_collective_end(end_s: float) -> None:
    """Called by the collectives: the current stream's tail includes a collective ending at ``end_s``."""
    s = current_stream()
    if end_s > s.comm_tail_s:
        s.comm_tail_s = end_s
