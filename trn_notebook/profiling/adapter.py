"""The one place where the simulator meets ``torch.profiler`` (installed when the device registers).

Real devices feed ``torch.profiler`` through a C++ Kineto plugin; this simulator has none, so four
methods of ``torch.autograd.profiler.profile`` (the object behind ``torch.profiler.profile``) are
wrapped, each calling the original first or last and adding only:

* ``_start_trace`` / ``__exit__``: open and close a recording :class:`~.recorder.Session` while
  Kineto records (the clocks' observer is set only in between);
* ``_ensure_function_events``: give each host op its modeled device time (``fe.append_kernel``, so
  ``prof.key_averages()`` has ``Self neuron`` / ``neuron total`` columns) and rename the simulator's
  inner CPU kernels ``[neuron sim] aten::…`` so they are not counted as work of their own;
* ``export_chrome_trace``: merge the session into the JSON Kineto wrote (:mod:`.merge`).

Device lanes are added when ``ProfilerActivity.PrivateUse1`` is among the activities (as with
TorchNeuron); with CPU only, the inner kernels are still labelled. :func:`uninstall` restores torch.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
import torch.autograd.profiler as _ap

from .. import state as _state
from ..device.autoload import real_backend_present
from ..outfiles import check_writable, write_chunks_atomic
from .link import link, simulator_kernels
from .merge import merge_stream
from .recorder import Session, recorder

log = logging.getLogger("trn_notebook.profiling")

_originals: dict[str, Any] = {}
_state.register(
    "profiler_patches", _state.Globals(__name__, "_originals"), reset=False
)  # torch.profiler methods we wrap
_METHODS = ("_start_trace", "__exit__", "_ensure_function_events", "export_chrome_trace")


def _backend_name() -> str:
    return torch._C._get_privateuse1_backend_name()


def device_lanes_wanted(prof: Any) -> bool:
    """True when the profile asked for device activity (``ProfilerActivity.PrivateUse1``) on neuron."""
    return getattr(prof, "use_device", None) == _backend_name() == "neuron"


def session_of(prof: Any) -> Session | None:
    """The recording session attached to a profile (``torch.profiler.profile`` or its inner object)."""
    inner = getattr(prof, "profiler", None)
    for obj in (prof, inner):
        s = getattr(obj, "_trn_session", None) if obj is not None else None
        if s is not None:
            return s
    return None


def install() -> None:
    """Wrap the profiler methods (idempotent)."""
    cls = _ap.profile
    if _originals or real_backend_present():  # real TorchNeuron brings its own Kineto plugin
        return
    for m in _METHODS:
        _originals[m] = cls.__dict__[m]
    orig_start, orig_exit = _originals["_start_trace"], _originals["__exit__"]
    orig_events, orig_export = _originals["_ensure_function_events"], _originals["export_chrome_trace"]

    def _start_trace(self: Any) -> Any:
        if _backend_name() == "neuron":
            self._trn_session = recorder.start()
            self._trn_recording = True
        return orig_start(self)

    def __exit__(self: Any, exc_type: Any, exc_val: Any, exc_tb: Any) -> Any:
        try:
            return orig_exit(self, exc_type, exc_val, exc_tb)
        finally:
            if getattr(self, "_trn_recording", False):
                self._trn_recording = False
                session = recorder.stop()
                if session is not None:
                    if exc_type is not None:
                        session.raised = f"{exc_type.__name__}: {exc_val}"
                    self._trn_session = session

    def _ensure_function_events(self: Any) -> Any:
        result = orig_events(self)
        session = getattr(self, "_trn_session", None)
        if session is not None and not getattr(self, "_trn_annotated", False) and self._function_events is not None:
            self._trn_annotated = True
            try:
                annotate_function_events(self, session)
            except Exception:  # annotation must never break the user's profile
                log.exception("could not add neuron device times to the profile's events")
        return result

    def export_chrome_trace(self: Any, path: Any, *args: Any, **kwargs: Any) -> Any:
        session = getattr(self, "_trn_session", None)
        if session is not None:  # Kineto only logs a failed write; a neuron profile's trace is never lost silently
            check_writable(path, "trace")
        result = orig_export(self, path, *args, **kwargs)
        if session is not None and str(path).endswith(".json"):
            merge_file(path, session, device_lanes_wanted(self))
        return result

    for fn in (_start_trace, __exit__, _ensure_function_events, export_chrome_trace):
        fn.__doc__ = getattr(_originals[fn.__name__], "__doc__", None)
        fn.__wrapped__ = _originals[fn.__name__]  # type: ignore[union-attr]
        setattr(cls, fn.__name__, fn)


def uninstall() -> None:
    """Restore torch's own methods."""
    cls = _ap.profile
    for m, fn in _originals.items():
        setattr(cls, m, fn)
    _originals.clear()


def merge_file(path: str | Path, session: Session, device_lanes: bool) -> None:
    """Rewrite the Kineto JSON at ``path`` with the session merged in."""
    p = Path(path)
    # streamed: Kineto's events are copied as text, never held as Python objects (a 10^6-op profile)
    write_chunks_atomic(p, merge_stream(p.read_text(encoding="utf-8"), session, device_lanes))


def annotate_function_events(prof: Any, session: Session) -> None:
    """Modeled device µs as kernels of the host ops; ``[neuron sim]`` names for the inner CPU kernels."""
    cpu = torch.autograd.DeviceType.CPU
    fes = [
        fe
        for fe in prof._function_events
        if fe.device_type == cpu and not (fe.is_async or fe.is_python_function or fe.is_user_annotation)
    ]
    start_ns = prof.kineto_results.trace_start_ns() if prof.kineto_results is not None else 0
    spans = [(fe.time_range.start, fe.time_range.end, fe.thread) for fe in fes]
    times = [(r.wall_ns + session.wall_offset_ns - start_ns) / 1000.0 for r in session.records]
    # FunctionEvents carry torch's own thread numbers, records the OS thread id: map by best overlap
    threads = {fe.thread for fe in fes}
    mapping: dict[int, int] = {}
    for tid in {r.thread for r in session.records}:
        mine = [t for t, r in zip(times, session.records) if r.thread == tid]
        best = max(threads, key=lambda th: sum(o >= 0 for o in link(spans, [(t, th) for t in mine])[0]), default=-1)
        mapping[tid] = best
    owner, parent = link(spans, [(t, mapping.get(r.thread, -1)) for t, r in zip(times, session.records)])
    for s in simulator_kernels(parent, owner):
        fes[s].name = f"[neuron sim] {fes[s].name}"
    if not device_lanes_wanted(prof):
        return
    for r, o in zip(session.records, owner):
        if o >= 0 and r.event.kind in ("op", "graph") and r.event.duration_s > 0:
            fe = fes[o]
            fe.append_kernel(
                r.event.name if r.event.kind == "graph" else f"aten::{r.event.name}", 0, r.event.duration_s * 1e6
            )
            fe.is_legacy = True  # as torch marks ops timed by a PrivateUse1 backend's own events
