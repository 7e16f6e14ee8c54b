"""A per-cell window over the device's logs: what one block of eager code did (``%%trn eager``).

:class:`EagerWindow` snapshots the placement log, the clocks and the allocator before and after a
block and turns the difference into an :class:`EagerReport`: placement by category, the costliest
CPU fallbacks with their source line, sync points, memory delta and peak, wall vs modeled device
time. Usable without IPython::

    with EagerWindow(fusion=True) as w:
        y = model(x)
    w.report
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from types import TracebackType

import torch

from .. import facts
from .. import state as _state
from ..device.clocks import clocks
from ..device.config import override
from ..device.memory.runtime import allocator
from ..device.placement import placement_log
from ..display.format import fmt_ms, fmt_pct
from ..display.results import Card, Result, Table, fmt_bytes, fmt_s
from ..facts.base import OpPlacement, Placement
from ..facts.simulator import placement_of
from .eager_hw import HardwareEagerReport, HardwareEagerWindow

_window_ids = itertools.count(1)
_state.register("eager_windows", _state.Globals(__name__, "_window_ids"), reset=False)  # ids stay unique
TOP_FALLBACKS = 10


@dataclass(repr=False)
class EagerReport(Result):
    """What one eager block did on the device (all figures are differences over the block)."""

    label: str
    ops: Placement
    calls_by_category: dict[str, int | str]
    syncs: list[tuple[str, str]]
    sync_points: int
    launches: int
    fused_groups: int
    memory_before: int
    memory_after: int
    peak_allocated: int
    wall_s: float
    device_s: float
    sim_host_s: float
    fusion: bool = False
    strict: bool = False
    failed: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def modeled_s(self) -> float:
        """Modeled time of the block: device kernels and copies plus CPU fallbacks (copies + host compute)."""
        return (self.ops.device_ms or 0.0) / 1e3

    @property
    def fallback_s(self) -> float:
        """Modeled time of the block's CPU fallbacks (copies both ways plus modeled host compute)."""
        return (self.ops.fallback_ms or 0.0) / 1e3

    def modeled_text(self) -> str:
        """``8.1 ms = device 6.0 ms + CPU fallbacks 2.1 ms (26%)``."""
        total, falls = self.modeled_s, self.fallback_s
        share = f" ({fmt_pct(falls, total)})" if total > 0 and falls > 0 else ""
        return f"{fmt_s(total)} = device {fmt_s(total - falls)} + CPU fallbacks {fmt_s(falls)}{share}"

    def launch_text(self) -> str:
        """Launches, and with fusion how many device ops they covered."""
        return _launch_text(self.launches, self.fused_groups, self.fusion)

    def fallbacks(self) -> list[tuple[str, OpPlacement]]:
        """CPU-fallback ops of the block, costliest first (by modeled cost)."""
        return self.ops.fallbacks

    def parts(self) -> list[Result]:
        c = self.calls_by_category
        mode = ", ".join(m for m, on in (("eager fusion", self.fusion), ("strict", self.strict)) if on) or "default"
        card = Card(
            f"{self.label}{' (failed)' if self.failed else ''}",
            [
                ("ops", f"{len(self.ops)} distinct, {self.ops.total_calls} calls"),
                (
                    "placement (calls)",
                    f"native {c.get('native', 0)} · fallback {c.get('cpu_fallback', 0)} · "
                    f"unsupported {c.get('unsupported', 0)} · host-only {c.get('host_only', 0)}",
                ),
                ("sync points", f"{self.sync_points}" + (f" ({_sync_text(self.syncs)})" if self.syncs else "")),
                ("launches", self.launch_text()),
                (
                    "memory",
                    f"{fmt_bytes(self.memory_before)} → {fmt_bytes(self.memory_after)} "
                    f"(Δ {fmt_bytes(self.memory_after - self.memory_before)}, peak {fmt_bytes(self.peak_allocated)})",
                ),
                ("modeled time", self.modeled_text()),
                ("wall time", f"{fmt_s(self.wall_s)} (the laptop running the simulator; not a device figure)"),
                ("mode", mode),
            ],
            self.notes,
        )
        out: list[Result] = [card]
        falls = self.fallbacks()
        if falls:
            out.append(
                Table(
                    "top CPU fallbacks by modeled cost (copies both ways + modeled host compute)",
                    ["op", "calls", "modeled ms", "wall ms", "bytes moved", "source"],
                    [
                        (
                            n,
                            e.calls,
                            fmt_ms((e.device_ms or 0.0) / 1e3),
                            fmt_ms((e.host_ms or 0.0) / 1e3),
                            fmt_bytes(e.bytes_moved or 0),
                            e.source,
                        )
                        for n, e in falls[:TOP_FALLBACKS]
                    ],
                )
            )
        return out


def _launch_text(launches: int, fused_groups: int, fusion: bool) -> str:
    if not fusion:
        return str(launches)
    return f"{launches} ({fused_groups} fused groups: ops after the first in a group add no launch)"


def _sync_text(syncs: list[tuple[str, str]]) -> str:
    shown = [f"{reason} at {where}" if where else reason for reason, where in syncs[:3]]
    more = f", … {len(syncs) - 3} more" if len(syncs) > 3 else ""
    return "; ".join(shown) + more


class EagerWindow:
    """Context manager measuring one block of eager code on the device.

    ``fusion=True`` turns on adaptive eager fusion and ``strict=True`` makes any CPU fallback raise,
    both only inside the block; ``on_device=True`` makes ``neuron`` the default device inside it.
    After the block, :attr:`report` holds the :class:`EagerReport` (also when the block raised); on hardware a
    :class:`~trn_notebook.session.eager_hw.HardwareEagerReport` (``SimulatorOnlyError`` for fusion/strict).
    """

    def __init__(
        self, label: str = "eager block", *, fusion: bool = False, strict: bool = False, on_device: bool = True
    ):
        self.label, self.fusion, self.strict, self.on_device = label, fusion, strict, on_device
        self.report: EagerReport | HardwareEagerReport | None = None
        self._phase = f"%%trn eager #{next(_window_ids)}"

    def __enter__(self) -> EagerWindow:
        backend = facts.current()
        if not backend.is_simulator:  # TorchNeuron: placement and memory only, through the hardware window
            if self.fusion or self.strict:
                backend.require_simulator(
                    "%%trn eager --fusion/--strict",
                    "set TORCH_NEURONX_ENABLE_CONCATENATION=1 (fusion) or "
                    "TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1 before the kernel starts",
                )
            self._hw: HardwareEagerWindow | None = HardwareEagerWindow(self.label, on_device=self.on_device)
            self._hw.__enter__()
            return self
        self._hw = None
        changes: dict[str, object] = {}
        if self.fusion:
            changes["eager_fusion"] = True
        if self.strict:
            changes["strict"] = True
        self._config = override(**changes)
        self._config.__enter__()
        self._prev_device = torch.get_default_device()
        if self.on_device:
            torch.set_default_device(torch.device("neuron", 0))
        self._memory_scope = allocator.phase_scope(self._phase)
        self._memory_scope.__enter__()
        self._ops = placement_log.snapshot()
        self._clocks = clocks.snapshot()
        self._memory = allocator.snapshot().counters.allocated
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        if self._hw is not None:
            self._hw.__exit__(et, ev, tb)
            self.report = self._hw.report
            return
        wall = time.perf_counter() - self._t0
        window = clocks.snapshot().since(self._clocks)
        ops = placement_of(placement_log.snapshot().since(self._ops))
        self._memory_scope.__exit__(None, None, None)
        if self.on_device and torch.get_default_device().type in ("privateuseone", "neuron"):
            torch.set_default_device(self._prev_device)
        self._config.__exit__(None, None, None)
        n_sync = int(window.sync_points)
        syncs = [(r, w) for r, w, _ in clocks.sync_events()[-n_sync:]] if n_sync else []
        memory = allocator.snapshot()
        peak = memory.phase_peaks.get(self._phase, {}).get("allocated", memory.counters.allocated)
        self.report = EagerReport(
            label=self.label,
            ops=ops,
            calls_by_category=ops.calls_by_category,
            syncs=syncs,
            sync_points=n_sync,
            launches=int(window.launches),
            fused_groups=int(window.fused_groups),
            memory_before=self._memory,
            memory_after=memory.counters.allocated,
            peak_allocated=peak,
            wall_s=wall,
            device_s=float(window.sim_device_s),
            sim_host_s=float(window.sim_host_s),
            fusion=self.fusion,
            strict=self.strict,
            failed=et is not None,
        )
