"""``trn_notebook.dryrun()``: a full-size model on ``neuron`` with shapes only, every figure modeled.

Inside ``with trn_notebook.dryrun() as run:`` tensors are shape-only (torch's ``FakeTensorMode``) and
every op on ``neuron`` is routed and charged exactly as on the simulated device (placement from the
op registry, modeled host and device time from :mod:`trn_notebook.device.costmodel`, sync points,
and memory through a shape-only copy of the caching allocator: same size classes, segments, caching,
phases and out-of-memory rule). Nothing is computed, so a 70B model needs no 140 GB of host memory.
The figures are kept apart from the measured ones (the placement log, clocks and allocator of the
session are untouched) and are labelled *dry* and *modeled* wherever they are shown.

Value reads (``.item()``, ``bool(t)`` in an ``if``, ``.tolist()``, ``.cpu()``, ``nonzero``) are host
syncs on the real device; in a dry run they are findings with their source line and the run goes on
with a stated stand-in (zero, or the largest possible shape), or stops with
``on_data_dependent="raise"``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import torch

from ..device.clocks import ClockSnapshot
from ..device.costmodel import graph_pricing
from ..device.dry.alloc import Crossing
from ..device.dry.dispatch import DryRunError, Finding
from ..device.dry.memory import CATEGORIES, MemoryCategories
from ..device.dry.session import DryFigures, DrySession, active, dry_runs, is_dry
from ..device.memory.allocator import MemorySnapshot, OutOfDeviceMemory
from ..display.format import fmt_bytes, fmt_compile, fmt_pct, fmt_s, plural
from ..display.results import Preformatted, Result
from ..facts.base import Placement
from ..facts.simulator import placement_of

DRY = "DRY RUN (shape only; every figure modeled, nothing measured)"


class DryRun(Result):
    """A dry run of the ``neuron`` device: ``with trn_notebook.dryrun() as run: ...`` then ``run.summary()``.

    A context manager while it runs, its figures afterwards (see the module docstring).

    ``capacity``: modeled HBM bytes (default: the device's current capacity). ``on_data_dependent``:
    ``"continue"`` (default; value reads become findings with a stand-in) or ``"raise"`` (a
    :class:`DryRunError` at the first). Raises ``ValueError`` for another value, ``RuntimeError`` when a
    dry run is already active in the thread.

    Over capacity is a finding, not the end: by default the run goes on past the first allocation the device
    would refuse; ``run.fits`` is then False and ``run.need`` (and the summary) give the peak it needs, the
    phase and source line where it first crossed the capacity, and the fewest logical cores and chips that
    would hold it. ``strict=True`` raises :class:`OutOfDeviceMemory` at the crossing, as the device does
    (the run keeps it as :attr:`DryRun.oom`).

    ``world_size`` (and optionally ``mesh_shape``/``mesh_dim_names``): a dry run of ranks
    (:mod:`trn_notebook.dry.ranks`): torch's fake process group and ``run.mesh``, a
    ``DeviceMesh("neuron", mesh_shape)``, for DDP / ``fully_shard`` / ``parallelize_module``; each collective
    charged with the α–β model; ``RuntimeError`` if a process group already exists. ``categories``
    (default: on for ranks) keeps memory by category at the peak (:mod:`trn_notebook.device.dry.memory`;
    name the model and optimizer with ``run.track(model, opt)``).
    """

    def __init__(
        self,
        label: str = "dry run",
        *,
        capacity: int | None = None,
        on_data_dependent: str = "continue",
        world_size: int | None = None,
        mesh_shape: Sequence[int] | None = None,
        mesh_dim_names: Sequence[str] | None = None,
        categories: bool | None = None,
        strict: bool = False,
    ):
        self._session = DrySession(label, capacity=capacity, on_data_dependent=on_data_dependent, strict=strict)
        self.oom: OutOfDeviceMemory | None = None
        self.ranks: Any = None
        if world_size is not None or mesh_shape is not None:
            from .ranks import DryRanks

            n = world_size if world_size is not None else int(math.prod(mesh_shape or (1,)))
            self.ranks = DryRanks(n, mesh_shape, mesh_dim_names)
        use_categories = categories if categories is not None else self.ranks is not None
        self._categories = MemoryCategories(self._session.tracker) if use_categories else None
        self.by_category: dict[str, int] | None = None  # at the allocated peak
        self.by_category_at_end: dict[str, int] | None = None  # of what is still live when the run ends
        self.notes: list[str] = []

    def __enter__(self) -> DryRun:
        if self.ranks is not None:
            self.ranks.start(self._session.mode, self._session.tracker)  # the mesh is built outside the fake mode
        try:
            self._session.__enter__()
        except BaseException:
            if self.ranks is not None:
                self.ranks.stop()
            raise
        self._eager_view = _transformers_eager_path(self._session.fake_mode)
        self._eager_view.__enter__()
        if self._categories is not None:
            self._categories.__enter__()
        return self

    def __exit__(self, tp: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        try:
            self._eager_view.__exit__(tp, exc, tb)
            if self._categories is not None:
                self._categories.__exit__(tp, exc, tb)
                self.by_category = self._categories.breakdown()  # before real tensors come back to moved models
                self.by_category_at_end = self._categories.breakdown("end")
            if self.ranks is not None:
                self.ranks.stop()  # reads the dry clocks, so before the session gives the real ones back
        finally:
            self._session.__exit__(tp, exc, tb)
        if isinstance(exc, OutOfDeviceMemory):
            self.oom = exc  # the answer to "will it fit": kept with the figures, re-raised for the caller

    @property
    def mesh(self) -> Any:
        """The ``DeviceMesh("neuron", …)`` of a dry run of ranks (``None`` without ``world_size``)."""
        return None if self.ranks is None else self.ranks.mesh

    def track(self, *objects: Any) -> None:
        """Name the model(s) and optimizer(s) whose tensors count as parameters, gradients and optimizer state.

        Raises ``RuntimeError`` when the run keeps no categories (``dryrun(categories=False)``), ``TypeError``
        for an object that is neither an ``nn.Module`` nor an optimizer.
        """
        if self._categories is None:
            raise RuntimeError("this dry run keeps no memory categories; use trn_notebook.dryrun(categories=True)")
        self._categories.track(*objects)

    def label(self, tensor: torch.Tensor, category: str) -> None:
        """Count ``tensor``'s storage in memory ``category`` (one of :data:`CATEGORIES`, e.g. a flat gradient
        buffer as ``"gradients"``). Raises ``ValueError`` for another category."""
        if category not in CATEGORIES:
            raise ValueError(f"unknown memory category {category!r}; categories: {', '.join(CATEGORIES)}")
        self._session.tracker.label(getattr(tensor, "_local_tensor", tensor), category)

    @contextmanager
    def priced_as_graph(self, **constants: float) -> Iterator[None]:
        """Inside: the ops are priced as kernels of one compiled graph (:func:`~..device.costmodel.graph_pricing`,
        with ``constants`` changed), and an op the compiler lowers runs on the device even where eager would
        fall back. Raises ``TypeError`` for an unknown cost constant."""
        mode = self._session.mode
        with graph_pricing(**constants):
            saved, mode.in_graph = mode.in_graph, True
            try:
                yield
            finally:
                mode.in_graph = saved

    def note(self, text: str) -> None:
        """Add a line to the run's summary (e.g. a layout decision such as KV-head replication)."""
        self.notes.append(text)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Attribute the dry memory peaks inside the block to phase ``name`` (e.g. ``"forward"``)."""
        with self._session.phase(name):
            yield

    # -- figures (live inside the run, frozen after it) ----------------------------------------
    @property
    def figures(self) -> DryFigures:
        """Every figure of the run as one frozen record."""
        return self._session.snapshot()

    @property
    def placement(self) -> Placement:
        """Per-op placement (modeled: the run computed nothing), aggregated as every view aggregates it."""
        return placement_of(self.figures.placement)

    @property
    def clocks(self) -> ClockSnapshot:
        """Modeled host and device clocks of the run (``wall_s`` is the laptop's time for the dry run itself)."""
        return self.figures.clocks

    @property
    def allocated_now(self) -> int:
        """Bytes the shape-only allocator holds right now (inside the run: live; after it: at its end)."""
        return int(self._session.allocator.counters.allocated)

    @property
    def memory(self) -> MemorySnapshot:
        """The shape-only allocator's figures: allocated, reserved, peaks per phase, OOM events."""
        return self.figures.memory

    @property
    def findings(self) -> tuple[Finding, ...]:
        """Value reads (host syncs on the real device) with their source lines and the stand-in used."""
        return self.figures.findings

    @property
    def assumptions(self) -> tuple[str, ...]:
        """What charges assumed for want of values, with their calls (MoE: balanced routing, assumed)."""
        return self.figures.assumptions

    @property
    def compiled(self) -> list[Any]:
        """Compile records of the graphs the run launched: ``torch.compile(backend="neuron")`` inside a dry run
        compiles for real (capture, AOT, our IR, passes, schedule) on shape-only inputs, and each run of a
        graph is charged its schedule (one launch). A graph compiled before the run and reused counts too: the
        run needs it. Empty when nothing compiled ran."""
        names = {n.removeprefix("graph:") for n in self.figures.placement if n.startswith("graph:")}
        if not names:
            return []
        from ..compiler.compile_log import compile_log

        return [r for r in compile_log.snapshot() if r.graph_name in names]

    @property
    def fits(self) -> bool:
        """True when no allocation exceeded the modeled HBM capacity of one logical core."""
        return self.oom is None and self.memory.counters.num_ooms == 0

    @property
    def need(self) -> CapacityNeed:
        """What the run needs against the capacity: its peak, where it first crossed, how many cores hold it."""
        return capacity_need(self.figures)

    def summary(self) -> str:
        """The figures as labelled text (every line says it is modeled; the header says it is dry)."""
        f = self.figures
        p = self.placement
        c = f.clocks
        m = f.memory
        mc = m.counters
        cats = ", ".join(f"{k} {v}" for k, v in p.calls_by_category.items() if v)
        lines = [
            f"{DRY} · {f.label} · chip {f.chip}",
            f"  ops charged (modeled): {p.total_calls} calls ({cats or 'none'}); {plural(len(p.fallbacks), 'fallback op')}",
            f"  modeled host time {fmt_s(c.sim_host_s)}, modeled device busy {fmt_s(c.sim_device_s)}, "
            f"device queue ends at {fmt_s(c.device_free_at_s)}; {c.launches} launches, {c.sync_points} sync points",
            f"  modeled memory: peak allocated {fmt_bytes(mc.peak_allocated)}, peak reserved {fmt_bytes(mc.peak_reserved)} "
            f"of {fmt_bytes(m.capacity)} ({fmt_pct(mc.peak_reserved, m.capacity)}); now allocated "
            f"{fmt_bytes(mc.allocated)} in {plural(m.live_segments, 'segment')}",
        ]
        compiled = self.compiled
        if compiled:
            from ..compiler.compile_time import record_compile_s

            by_kind: dict[str, int] = {}
            for r in compiled:
                by_kind[r.kind or "graph"] = by_kind.get(r.kind or "graph", 0) + 1
            modeled = [s for r in compiled if (s := record_compile_s(r)) is not None]
            lines.append(
                f"  compiled for real on shape-only inputs: {plural(len(compiled), 'graph')} "
                f"({', '.join(f'{k} {n}' for k, n in by_kind.items())}), each run one launch charged its schedule; "
                f"compile {fmt_compile(sum(r.compile_s for r in compiled), sum(modeled) if modeled else None)} "
                "(cold, every graph)"
            )
        for phase, peaks in m.phase_peaks.items():
            if phase != "default" or len(m.phase_peaks) == 1:
                lines.append(f"    phase {phase}: peak allocated {fmt_bytes(peaks['allocated'])} (modeled)")
        if self.by_category is not None:
            peak = sum(self.by_category.values())
            parts = ", ".join(f"{k} {fmt_bytes(self.by_category[k])}" for k in CATEGORIES if self.by_category[k])
            lines.append(
                f"  at the peak ({fmt_bytes(peak)}, phase {self._session.tracker.peak_phase}), modeled: {parts}"
            )
        if self.ranks is not None:
            r = self.ranks
            kinds = ", ".join(f"{k} ×{n} ({fmt_bytes(b)}, {fmt_s(t)})" for k, (n, b, t) in r.by_kind().items())
            lines.append(
                f"  ranks: {r.world_size} (mesh {'×'.join(map(str, r.mesh_shape))}, fake process group; every rank "
                f"runs rank 0's program, figures per rank); collectives (modeled α–β): {kinds or 'none'}"
            )
            lines.append(
                f"    communication {fmt_s(r.comm_s)} modeled, {fmt_s(r.exposed_s)} of it exposed (not hidden by compute)"
            )
        lines.extend(f"  {n}" for n in self.notes)
        if self.oom is not None or mc.num_ooms:
            lines.extend(f"  {x}" for x in self.need.lines(self.oom))
        if f.findings:
            lines.append(f"  {plural(len(f.findings), 'value read')} (host syncs on the real device):")
            lines.extend(f"    {x}" for x in f.findings)
        if f.assumptions:
            lines.append("  assumed (no values in a dry run):")
            lines.extend(f"    {x}" for x in f.assumptions)
        lines.append(
            f"  (the dry run itself took {fmt_s(f.wall_s or c.wall_s)} of wall time here; not a device figure)"
        )
        return "\n".join(lines)

    def parts(self) -> list[Result]:
        """The one rendering of a dry run (``repr``, ``_repr_html_`` and ``%%trn dryrun`` all show it)."""
        return [Preformatted("", self.summary())]


@dataclass(frozen=True)
class CapacityNeed:
    """A dry run's memory against the modeled capacity of one logical core (all modeled).

    ``min_cores``/``min_chips``: the fewest logical cores (and chips of the run's chip) whose capacity adds up
    to the peak allocated — assumed: every byte sharded evenly, nothing replicated; ``trn_notebook.plan()``
    models real layouts (TP, FSDP) and what they replicate.
    """

    peak_allocated: int
    peak_reserved: int
    capacity: int
    crossing: Crossing | None
    min_cores: int
    min_chips: int
    cores_per_chip: int
    chip: str
    ooms: int = 0  # allocations refused (a strict run stops at the first; the user's code may have caught it)
    first_refused: tuple[int, str] | None = None  # (bytes asked, phase) of the first refused allocation

    @property
    def fits(self) -> bool:
        """True when the peak never needed more than the capacity and nothing was refused."""
        return self.crossing is None and self.ooms == 0 and self.peak_reserved <= self.capacity

    def lines(self, oom: OutOfDeviceMemory | None = None) -> list[str]:
        """The finding as labelled text lines (modeled / assumed), or ``[]`` when the run fit."""
        if self.fits and oom is None:
            return []
        x = self.crossing
        if x is None:  # a strict run stopped at the crossing: the peak is only what it reached
            asked_bytes = oom.asked if oom is not None else (self.first_refused or (None, ""))[0]
            asked = fmt_bytes(asked_bytes) if asked_bytes is not None else "an unknown size"
            phase = f" in phase {self.first_refused[1]}" if self.first_refused else ""
            return [
                f"DOES NOT FIT (modeled): out of memory{phase} asking for {asked} with "
                f"{fmt_bytes(self.peak_allocated)} allocated at the peak of {fmt_bytes(self.capacity)} (strict: the "
                "run stopped there; without strict=True it goes on and reports the peak it needs)"
            ]
        return [
            f"DOES NOT FIT (modeled): needs peak allocated {fmt_bytes(self.peak_allocated)} (reserved "
            f"{fmt_bytes(self.peak_reserved)}) against {fmt_bytes(self.capacity)} per logical core "
            f"({self.peak_allocated / self.capacity:.2f}×)",
            f"  first over capacity in phase {x.phase} at {x.source or 'an unknown line'}: asking for "
            f"{fmt_bytes(x.asked)} with {fmt_bytes(x.allocated)} allocated, {fmt_bytes(x.reserved)} reserved "
            "(the real device stops there with OutOfDeviceMemory; the dry run went on)",
            f"  holds on ≥ {plural(self.min_cores, 'logical core')} = ≥ {plural(self.min_chips, 'chip')} of "
            f"{self.chip} ({self.cores_per_chip} logical cores each) if every byte is sharded evenly (assumed; "
            "trn_notebook.plan() models real layouts)",
        ]


def capacity_need(f: DryFigures) -> CapacityNeed:
    """The :class:`CapacityNeed` of a dry run's figures (the one place it is computed)."""
    mc = f.memory.counters
    capacity = max(f.memory.capacity, 1)
    cores = max(1, math.ceil(mc.peak_allocated / capacity))
    per_chip = max(f.logical_cores, 1)
    refused = f.memory.oom_events[0] if f.memory.oom_events else None
    return CapacityNeed(
        mc.peak_allocated, mc.peak_reserved, f.memory.capacity, f.crossing, cores, math.ceil(cores / per_chip),
        per_chip, f.chip, mc.num_ooms, (refused[1], refused[2]) if refused else None,
    )  # fmt: skip


@contextmanager
def _transformers_eager_path(fake_mode: Any) -> Iterator[None]:
    """Inside a dry run, ``transformers`` runs the code a real run on ``neuron`` runs.

    ``transformers.utils.import_utils.is_tracing(t)`` is True for any ``FakeTensor``, and then the models take
    their tracing path (masks built where eager skips them, no host-sync checks): a dry run's shape-only
    tensors would run other ops than the real run charges (bert: one extra host-to-device copy). While the run
    is active the session's own shape-only tensors are not "fake" to ``transformers``; dynamo's fakes (a
    ``torch.compile`` inside the run) still are, and compiling is tracing anyway. A no-op without ``transformers``.
    """
    import sys

    iu = sys.modules.get("transformers.utils.import_utils")
    original = getattr(iu, "is_fake_tensor", None)
    if iu is None or original is None:
        yield
        return

    def is_fake_tensor(x: Any) -> bool:
        return bool(original(x)) and getattr(x, "fake_mode", None) is not fake_mode

    iu.is_fake_tensor = is_fake_tensor  # type: ignore[attr-defined]
    try:
        yield
    finally:
        iu.is_fake_tensor = original  # type: ignore[attr-defined]


dryrun = DryRun
"""``trn_notebook.dryrun(...)`` makes a :class:`DryRun` (the name the lessons and the magics use)."""


def last() -> DryFigures | None:
    """The figures of the last finished dry run in this process (``None`` before any)."""
    return dry_runs.snapshot()


__all__ = ["DRY", "CapacityNeed", "DryRun", "DryRunError", "Finding", "active", "dryrun", "is_dry", "last"]
