"""``trn_notebook.profile()``: ``torch.profiler`` around a block, with the merged trace and the summary.

A thin layer over the standard profiler (``activities=[CPU, PrivateUse1]``, shapes, stacks): the
result keeps the profile, its merged trace, the op table, the "why is it slow" summary and a timeline
widget. A block that raises keeps its partial trace (marked so) and re-raises.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch.profiler import ProfilerActivity

from ..device.memory.runtime import get_chip, runtime_reservation
from ..display.views import view_for
from .adapter import session_of
from .config import NeuronConfig, ProfileMode
from .export import save_trace_dict, trace_dict
from .summary import Summary, summarize
from .table import profile_table
from .traceio import load_trace

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger("trn_notebook.profiling")


class NoDeviceActivity(RuntimeError):
    """The profiled code never ran anything on the neuron device."""


NO_DEVICE_MESSAGE = (
    "no neuron activity was recorded: the profiled code ran on the CPU. Put the model and inputs on the "
    "device (model.to('neuron'), x.to('neuron')) or call torch.set_default_device('neuron') first, then "
    "profile again"
)


class ProfileResult:
    """What a profiled block produced: ``prof`` (torch.profiler), ``trace``, ``table()``, ``summary()``."""

    def __init__(self, config: NeuronConfig) -> None:
        self.config = config
        self.prof: Any = None
        self.error: str = ""
        self._trace: dict[str, Any] | None = None
        self.hbm_reserved: int | None = None  # DEVICE mode's modeled HBM hold (bytes); None: no published figure

    @property
    def partial(self) -> bool:
        """True when the block raised: the trace covers what ran before the error."""
        return bool(self.error)

    @property
    def records(self) -> int:
        """Device events recorded: launches, graphs, copies, fallbacks (0: nothing ran on the device)."""
        session = session_of(self.prof) if self.prof is not None else None
        return sum(1 for r in session.records if r.event.kind != "sync") if session is not None else 0

    @property
    def trace(self) -> dict[str, Any]:
        """The merged Chrome trace (computed once). Raises :class:`NoDeviceActivity` if it has no device events."""
        if self._trace is None:
            if self.prof is None:
                raise RuntimeError("the profile has not run yet: use `with trn_notebook.profile() as result:`")
            if self.records == 0:
                raise NoDeviceActivity(NO_DEVICE_MESSAGE)
            trace = trace_dict(self.prof)
            _apply_modes(trace, self.config)
            if self.error:
                trace["trnNotebook"]["partial"] = self.error
            self._trace = trace
        return self._trace

    def table(self) -> pd.DataFrame:
        """Per-op table with modeled device columns (:func:`trn_notebook.profile_table`)."""
        return profile_table(self.prof)

    def summary(self, top: int = 10) -> Summary:
        """The "why is it slow" breakdown of this trace."""
        return summarize(load_trace(self.trace), top)

    def save(self, path: str | Path) -> Path:
        """Write the merged trace as JSON (open it in https://ui.perfetto.dev). Raises ``OSError``."""
        return save_trace_dict(self.trace, path)

    def widget(self) -> Any:
        """The timeline widget over this trace."""
        return view_for(self)


def _apply_modes(trace: dict[str, Any], config: NeuronConfig) -> None:
    """Drop lanes whose :class:`ProfileMode` was not requested."""
    from ..device.trace.lanes import lane
    from .merge import PID

    keep: set[int] = {0}
    if ProfileMode.DEVICE in config.modes:
        keep |= {lane(k).tid for k in ("op", "graph", "kernel", "comm")}
    if ProfileMode.RUNTIME in config.modes:
        keep |= {lane(k).tid for k in ("host", "transfer", "sync", "fallback", "compile")}
    memory = ProfileMode.HOST_MEMORY in config.modes
    if len(keep) == 1 + 4 + 5 and memory:
        return
    out = []
    for e in trace["traceEvents"]:
        if e.get("pid") != PID or e.get("ph") == "M":
            out.append(e)
        elif e.get("ph") == "C":
            if memory:
                out.append(e)
        elif e.get("tid") in keep:
            out.append(e)
    trace["traceEvents"] = out


@contextlib.contextmanager
def profile(
    *,
    config: NeuronConfig | None = None,
    record_shapes: bool = True,
    with_stack: bool = False,
    save: str | Path | None = None,
) -> Iterator[ProfileResult]:
    """Profile the block with ``torch.profiler`` (CPU + neuron); yields a :class:`ProfileResult`.

    The result is filled when the block ends. A block that raises keeps its partial trace (and says so
    in the log and the summary), then the exception propagates. Raises ``RuntimeError`` if the neuron
    device is not registered in this process.
    """
    if torch._C._get_privateuse1_backend_name() != "neuron":
        raise RuntimeError("the neuron device is not registered: `import trn_notebook` first (it registers 'neuron')")
    from ..facts import current

    current().require_simulator(
        "trn_notebook.profile() (modeled device lanes)",
        "torch.profiler.profile(activities=[CPU, PrivateUse1]) with TorchNeuron's NeuronConfig, viewed in Neuron Explorer",
    )
    result = ProfileResult(config or NeuronConfig())
    prof = torch.profiler.profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
        record_shapes=record_shapes,
        with_stack=with_stack,
    )
    result.prof = prof
    hold: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
    if ProfileMode.DEVICE in result.config.modes:  # its hardware-notification buffers hold HBM (trn2: ~5 GB)
        result.hbm_reserved = get_chip().profiler_device_mode_bytes
        if result.hbm_reserved:
            hold = runtime_reservation(result.hbm_reserved, "the profiler's ProfileMode.DEVICE")
    try:
        with hold, prof:
            yield result
    except BaseException as exc:
        result.error = f"{type(exc).__name__}: {exc}"
        log.warning("profiled block raised; the partial trace (%d device events) is kept", result.records)
        raise
    finally:
        if save is not None and result.records:
            result.save(save)
