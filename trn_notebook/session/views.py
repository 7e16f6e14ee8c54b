"""Read-only views of the session's logs as result objects (``%trn ops|memory|cache|shapes|explain|report``).

Each function reads a single source of truth (placement log, allocator, compile cache, shape log,
``explain``) and returns a :mod:`trn_notebook.display.results` object; the optional arguments perform the
one documented action (reset, empty the cache …) first. Compiler-backed views import the compiler
lazily and raise ``ValueError`` naming the valid choices when a name or stage is unknown.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .. import facts
from ..compiler.shape_log import ShapeEntry
from ..display.format import EXPLAIN_STAGES, WALL_MS, fmt_ms, fmt_s
from ..display.results import Card, Message, Preformatted, Result, Sections, Table, fmt_bytes
from ..extras import MissingExtra
from ..facts.base import NA, NOT_MEASURED, shown

STAGES = EXPLAIN_STAGES


def _optional(module: str) -> Any:
    """``module`` if it is installed (``None`` otherwise); errors inside it propagate."""
    if importlib.util.find_spec(module) is None:
        return None
    return importlib.import_module(module)


def _ms(value: float | None) -> str:
    return NOT_MEASURED if value is None else fmt_ms(value / 1e3)


def ops(*, reset: bool = False, max_rows: int = 50) -> Result:
    """The placement log: calls by category and the ops with the most modeled device time.

    Read through the live backend: on hardware the cost, transfer and source columns say "not measured".
    ``reset=True`` clears the log after reading it (the result shows what was cleared).
    """
    backend = facts.current()
    placement = backend.placement()
    top = sorted(placement.items(), key=lambda kv: (kv[1].device_ms or 0.0, kv[1].calls or 0), reverse=True)
    rows = [
        (op, r.category, shown(r.calls), _ms(r.device_ms), _ms(r.host_ms), _bytes(r.bytes_moved), shown(r.source))
        for op, r in top[:max_rows]
    ]
    calls = placement.calls_by_category
    notes = []
    if len(placement) > max_rows:
        notes.append(f"top {max_rows} of {len(placement)} ops by modeled device time; all: trn_notebook.op_table()")
    if not placement.measured:
        notes.append(f"{backend.name} reports which ops ran and fell back, not their cost: profile with torch.profiler")
    if reset:
        backend.clear_op_tracking()
        notes.append("the placement log was cleared after this table")
    by_category = f"native {calls['native']} · fallback {calls['cpu_fallback']}"
    if backend.is_simulator:
        by_category += f" · unsupported {calls['unsupported']} · host-only {calls['host_only']}"
    device_ms = placement.device_ms
    card = Card(
        "op placement",
        [
            ("ops", f"{len(placement)} distinct, {placement.total_calls} calls"),
            ("calls by category", by_category),
            ("modeled device time", NOT_MEASURED if device_ms is None else fmt_s(device_ms / 1e3)),
        ],
    )
    cols = ["op", "category", "calls", "device ms", WALL_MS, "bytes moved", "source"]
    title = "ops by modeled device time" if placement.measured else "ops (device time not measured)"
    return Sections([card, Table(title, cols, rows, notes, max_rows=max_rows)])


def _bytes(value: int | None) -> str:
    return NOT_MEASURED if value is None else fmt_bytes(value)


def compatibility(ops: str | None = None, *, quick: bool = True) -> Any:
    """The op compatibility table from ``trn_notebook.compat`` (a message if it or its ``compat`` extra is missing).

    It runs PyTorch's OpInfo samples on the device: ``ops`` (globs) narrows it, ``quick`` samples less.
    Raises ``ValueError`` if ``ops`` matches nothing.
    """
    fn = getattr(_optional("trn_notebook.compat"), "compatibility_table", None)
    if fn is None:
        return Message("the op compatibility table (trn_notebook.compat) is not available in this version", "warning")
    try:
        table = fn(ops, quick=quick)
    except MissingExtra as exc:
        return Message(str(exc), "warning")
    if isinstance(table, Result) or hasattr(table, "_repr_html_"):
        return table
    return Preformatted("op compatibility", str(table))


def memory(*, reset_peak: bool = False, empty_cache: bool = False) -> Result:
    """Device memory counters (current, peak, by phase); optionally reset peaks or release cached segments.

    Read through the live backend (on hardware ``torch.neuron.memory_stats()``; peaks by phase are simulator-only).
    Raises ``RuntimeError`` when the hardware backend lacks the function asked for.
    """
    backend = facts.current()
    notes = []
    if empty_cache:
        released = backend.empty_cache()
        notes.append(
            f"empty_cache released {fmt_bytes(released)} of cached segments"
            if released is not None
            else "empty_cache called (the bytes released are not reported)"
        )
    if reset_peak:
        backend.reset_peak_memory()
        notes.append("peaks reset to the current values")
    snap = backend.memory_snapshot()
    c = snap.counters

    def figure(counter: str, text: str) -> str:  # a counter the backend does not report is not a 0
        return text if snap.measured(counter) else NOT_MEASURED

    rows = [
        (name, figure(name, fmt_bytes(getattr(c, name))), figure(f"peak_{name}", fmt_bytes(getattr(c, f"peak_{name}"))))
        for name in ("allocated", "active", "reserved")
    ]
    segments = (
        str(snap.live_segments)
        if snap.measured("num_segments") and snap.measured("num_segment_frees")
        else NOT_MEASURED
    )
    events = (
        f"{figure('num_alloc_retries', str(c.num_alloc_retries))} alloc retries · "
        f"{figure('num_ooms', str(c.num_ooms))} OOMs · {segments} segments"
    )
    capacity = fmt_bytes(snap.capacity) if snap.capacity else NA
    out: list[Result] = [
        Table(f"device memory (capacity {capacity})", ["counter", "current", "peak"], rows, [events, *notes])
    ]
    phases = [(p, fmt_bytes(v["allocated"]), fmt_bytes(v["reserved"])) for p, v in snap.phase_peaks.items()]
    if phases:
        out.append(Table("peaks by phase", ["phase", "allocated", "reserved"], phases))
    if not backend.is_simulator:
        out.append(
            Message(
                "peaks by phase, the memory timeline and simulated OOMs are simulator-only (n/a here): "
                "call torch.neuron.reset_peak_memory_stats() before a phase and max_memory_allocated() after it"
            )
        )
    return Sections(out)


def cache(*, clear: bool = False, directory: str | None = None) -> Result:
    """The persistent compile cache: directory and entries; ``clear`` deletes them, ``directory`` moves it.

    On hardware it lists TorchNeuron's NEFF cache directory (graph, kind and inputs n/a) and ``clear`` raises
    ``ValueError`` (that cache is TorchNeuron's to manage). Raises ``ValueError`` for a path that is a file.
    """
    from ..compiler import config as cconfig
    from ..compiler import disk_cache as ccache

    backend = facts.current()
    notes = []
    if directory is not None:
        path = Path(directory).expanduser()
        if path.exists() and not path.is_dir():
            raise ValueError(f"{directory} exists and is not a directory")
        os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"] = str(path)  # the documented switch, re-read below
        if backend.is_simulator:
            cconfig.reload_config()
        notes.append(f"cache directory set to {path} (TORCH_NEURONX_NEFF_CACHE_DIR)")
    if not backend.is_simulator:
        return _neff_cache(backend, clear, notes)
    if clear:
        notes.append(f"removed {ccache.clear_cache()} entries")
    entries = backend.cache_entries()
    cols = ["key", "graph", "kind", "inputs", "size", "created"]
    rows = [
        (
            str(e.get("key", ""))[:16],
            e.get("graph_name", ""),
            e.get("kind", ""),
            " ".join(e.get("input_signature", [])),
            fmt_bytes(e.get("bytes", 0)),
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(e.get("created", 0.0)))),
        )
        for e in entries
    ]
    return Table(f"compile cache: {ccache.cache_dir()} ({len(entries)} entries)", cols, rows, notes)


def _neff_cache(backend: facts.Backend, clear: bool, notes: list[str]) -> Result:
    """TorchNeuron's NEFF cache directory as a table (entry name, size, modification time)."""
    root = backend.cache_dir()
    if clear:
        raise ValueError(
            f"the NEFF cache ({root}) belongs to TorchNeuron; trn_notebook does not delete it: remove the directory "
            "yourself, or set TORCH_NEURONX_NEFF_CACHE_DIR to a fresh one (%trn cache --dir PATH)"
        )
    if root is None:
        return Message("the NEFF cache is disabled (TORCH_NEURONX_DISABLE_NEFF_CACHE=1)")
    entries = backend.cache_entries()
    rows = [
        (
            str(e["key"])[:40],
            fmt_bytes(int(e["bytes"])),
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(e["created"]))),
        )
        for e in entries
    ]
    notes.append(f"{backend.name}: graph, kind and input signature per entry are n/a (the NEFF cache does not say)")
    return Table(f"NEFF cache: {root} ({len(entries)} entries)", ["entry", "size", "modified"], rows, notes)


def shape_key(name: str) -> str:
    """The shape-log key of ``name``: a compiled cell's compiled callable name, else ``name`` itself."""
    from ..compiler import shape_log
    from .compiled import compiled_cells

    cell = compiled_cells().get(name)
    if cell is not None and name not in shape_log.snapshot():
        return str(getattr(cell.fn, "name", name))
    return name


@dataclass(repr=False)
class ShapesResult(Result):
    """Observed input shapes and compiled graphs per compiled callable (``%trn shapes``)."""

    entries: Mapping[str, ShapeEntry]
    compiled: dict[str, int] = field(default_factory=dict)
    """Forward/inference graphs the compile log holds per callable (distinct input signatures)."""

    def graphs(self, name: str | None = None) -> int:
        """Graphs compiled for ``name`` (the only callable when omitted), as the compile log counts them.

        Without compile records for it (a result built from the shape log alone): one per bucket, else one per
        shape. Raises ``ValueError`` for an unknown name.
        """
        rec = self._entry(name)
        key = name if name is not None else next(iter(self.entries))
        if key in self.compiled:
            return self.compiled[key]
        return len(rec.padded) if rec.padded else len(rec.signatures)

    def shapes_seen(self, name: str | None = None) -> int:
        """Distinct input signatures ``name`` was called with."""
        return len(self._entry(name).signatures)

    def _entry(self, name: str | None) -> ShapeEntry:
        if name is None:
            if len(self.entries) != 1:
                raise ValueError(f"name one of: {', '.join(sorted(self.entries)) or '(none yet)'}")
            return next(iter(self.entries.values()))
        if name not in self.entries:
            raise ValueError(f"no compiled callable named {name!r}; known: {', '.join(sorted(self.entries))}")
        return self.entries[name]

    def parts(self) -> list[Result]:
        if not self.entries:
            return [
                Message(
                    "no compiled callable has run yet: compile one with %%trn compile, trn_notebook.compile or "
                    "trn_notebook.bucketed, call it, and its input shapes and graphs appear here"
                )
            ]
        parts: list[Result] = []
        for key, rec in self.entries.items():
            sigs = sorted(rec.signatures.items(), key=lambda kv: -kv[1])
            notes = [f"bucket policy: {rec.policy or 'none'}"]
            padded = rec.padded
            if padded:
                notes.append("padded to: " + ", ".join(f"{b} ×{n}" for b, n in sorted(padded.items())))
            for dim, hist in rec.observed.items():
                notes.append(f"{dim}: " + ", ".join(f"{length} ×{n}" for length, n in sorted(hist.items())[:20]))
            graphs = self.graphs(key)
            limit = torch._dynamo.config.recompile_limit
            if not padded and len(sigs) > limit:
                notes.append(
                    f"dynamo's recompile_limit is {limit}: signatures beyond it run eagerly (not compiled); "
                    "use a bucket policy (--buckets) to bound the number of graphs"
                )
            if padded:
                title = (
                    f"shapes of {key}: {len(sigs)} input shapes seen → {graphs} graph{'s' if graphs != 1 else ''} "
                    "(each shape padded up to its bucket; one graph per bucket)"
                )
            elif graphs < len(sigs):
                title = (
                    f"shapes of {key}: {len(sigs)} input shapes seen → {graphs} graph{'s' if graphs != 1 else ''} "
                    f"compiled (no buckets: one per shape; {len(sigs) - graphs} ran eagerly, not compiled)"
                )
            else:
                title = f"shapes of {key}: {len(sigs)} input shapes seen = {graphs} graph{'s' if graphs != 1 else ''} (no buckets: one per shape)"
            parts.append(Table(title, ["signature", "calls"], sigs, notes))
        return parts


def shapes(name: str | None = None) -> ShapesResult:
    """Observed input signatures per compiled callable (``name`` selects one; ``ValueError`` if unknown)."""

    from ..compiler import compile_log, shape_log

    snap = shape_log.snapshot()
    if name is not None:
        name = shape_key(name)
        if name not in snap:
            raise ValueError(f"no compiled callable named {name!r}; known: {', '.join(sorted(snap)) or '(none yet)'}")
        snap = {name: snap[name]}
    signatures: dict[str, set[tuple[str, ...]]] = {}
    for r in compile_log.snapshot():  # a graph per distinct input signature (a re-load from the cache is the same)
        if r.model_name in snap and r.kind != "backward":
            signatures.setdefault(r.model_name, set()).add(tuple(r.input_signature or ()))
    return ShapesResult(snap, {k: len(v) for k, v in signatures.items()})


def explain(target: Any, stage: str | None = None, *, title: str = "") -> Result:
    """Every stage (or one: fx, aten, ir, passes, schedule) of the compilation of ``target``."""
    from .. import compiler

    if stage is not None and stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; valid stages: {', '.join(STAGES)}")
    stages: dict[str, str] = compiler.explain(target).stages
    keys = STAGES[stage] if stage else tuple(stages)
    parts: list[Result] = [Preformatted(f"{title} — {k}" if title else k, stages.get(k, "(empty)")) for k in keys]
    return Sections(parts)


def report() -> Result:
    """The last migration report measured in this session (``trn_notebook.report(model, inputs)``), else the
    report of the session's evidence alone (saying what passing a model would measure)."""
    from ..migration.render import last_report

    return last_report()


def dashboard() -> Result:
    """Status, placement, memory and compile cache in one result (the fallback of the dashboard widget)."""
    from .status_card import status

    parts: list[Result] = [status(), ops(max_rows=15), memory()]
    return Sections(parts)
