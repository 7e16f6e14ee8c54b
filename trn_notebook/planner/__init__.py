"""``trn_notebook.plan()``: will it fit, and with which layout — every candidate dry-run, one table.

For each candidate layout (TP × FSDP × activation checkpointing) :func:`plan` runs one full-size
training step shape-only (:mod:`.run`, on :func:`trn_notebook.dryrun` with ``world_size``) and reads
the figures the dry run models: the allocator's peak against the HBM of one logical core
(:mod:`trn_notebook.device.chips`: Trn2 96 GiB over 4 logical cores at LNC=2, trainium-figures.md),
the phase that set the peak and the memory by category at it, the modeled step time (the cost model's
clock after the step's final sync), the modeled communication and its exposed part (α–β model,
:mod:`trn_notebook.distributed.commmodel`), tokens/s per chip, and the host memory a real run would need to
load the checkpoint. Nothing is measured: every figure is labelled modeled (or assumed).
"""

from __future__ import annotations

from typing import Any

import torch

from ..device.chips import get_chip_spec, with_cores
from ..device.dry.memory import CATEGORIES
from ..display.format import fmt_bytes, fmt_s
from ..display.results import Message, Result, Table
from ..display.views import view_for
from .layouts import DEFAULT_LAYOUTS, Layout, Workload, parse_layouts
from .run import LayoutRun, ModelSource, run_layout

COLUMNS = (
    "layout", "ranks", "chips", "fits", "peak per core (modeled)", "capacity per core", "peak phase",
    "step time (modeled)", "exposed comm (modeled)", "sequences/s (modeled)", "tokens/s per chip (modeled)",
    "host memory (assumed)",
)  # fmt: skip


class PlanResult(Result):
    """The plan: :attr:`table` (a pandas DataFrame, one row per layout), :attr:`best`, the dry runs in :attr:`runs`."""

    def __init__(
        self,
        model: str,
        workload: Workload,
        chip: str,
        lnc: int,
        capacity: int,
        runs: list[LayoutRun],
        extrapolated: tuple[int, int, int] | None = None,
        more_runs: list[LayoutRun] | None = None,
        profiler_bytes: int = 0,
        stage_layers: list[int] | None = None,
        execution: str = "eager",
    ):
        import pandas as pd

        self.model, self.workload, self.chip, self.lnc, self.capacity = model, workload, chip, lnc, capacity
        self.runs = {r.layout.name: r for r in runs}
        self.cores_per_chip = get_chip_spec(chip).physical_cores // lnc
        self.extrapolated = extrapolated
        self.profiler_bytes = profiler_bytes  # HBM the profiler's DEVICE mode holds, already out of capacity
        self.execution = execution
        rows = [self._row(r) for r in runs]
        if extrapolated is not None and more_runs is not None:
            d1, d2, full = extrapolated
            at = stage_layers or [full] * len(rows)  # a pipeline stage's share of the layers
            rows = [_extrapolate(a, self._row(b), d1, d2, n) for a, b, n in zip(rows, more_runs, at, strict=True)]
        spec = get_chip_spec(chip)
        for row in rows:
            sequences = workload.batch * row["fsdp"] * row["dp"] * row["microbatches"]
            rate = sequences / row["step_s"] if row["step_s"] > 0 else float("nan")
            row["fits"] = bool(row["peak_allocated"] <= capacity)
            row["instances"] = row["chips"] / spec.chips_per_instance
            row["sequences_per_s"] = rate
            row["tokens_per_s_per_chip"] = rate * workload.seq / max(row["chips"], 1e-12)
        self.table = pd.DataFrame(rows).set_index("layout")
        fitting = self.table[self.table["fits"]]
        self.best: str | None = None
        if len(fitting):
            self.best = str(fitting.sort_values(["chips", "tokens_per_s_per_chip"], ascending=[True, False]).index[0])

    def _row(self, r: LayoutRun) -> dict[str, Any]:
        m = r.run.memory.counters
        cats = dict(r.run.by_category or {})
        in_flight = r.step.in_flight_bytes
        if in_flight:
            cats["activations"] = cats.get("activations", 0) + in_flight
        return {
            "layout": r.layout.name,
            "tp": r.layout.tp,
            "pp": r.layout.pp,
            "fsdp": r.layout.fsdp,
            "dp": r.layout.dp,
            "ac": r.layout.ac,
            "ranks": r.layout.world_size,
            "chips": r.layout.world_size / self.cores_per_chip,
            "peak_reserved": m.peak_reserved + in_flight,
            "peak_allocated": m.peak_allocated + in_flight,
            "capacity": self.capacity,
            "peak_phase": r.run._session.tracker.peak_phase,
            **{c: cats.get(c, 0) for c in CATEGORIES},
            "microbatches": r.step.microbatches,
            "micro_s": r.step.micro_s,
            "bubble_s": r.step.bubble_s,
            "optimizer_s": r.step.optimizer_s,
            "step_s": r.step_s,
            "comm_s": r.step.comm_s,
            "exposed_comm_s": r.step.exposed_s,
            "host_bytes": r.params * 2,
            "note": r.note or "",
        }

    def widget(self) -> Any:
        """The plan as a widget: stacked memory bars per layout against the capacity line, and the step time."""
        return view_for(self)

    def parts(self) -> list[Result]:
        """The one rendering of a plan (text, HTML, ``%trn plan``)."""
        w = self.workload
        rows = []
        for name, r in self.table.iterrows():
            mark = " ◀ cheapest that fits" if name == self.best else ""
            rows.append(
                [
                    f"{name}{mark}",
                    int(r["ranks"]),
                    f"{r['chips']:g}",
                    "yes" if r["fits"] else "NO",
                    fmt_bytes(r["peak_allocated"]),
                    fmt_bytes(r["capacity"]),
                    r["peak_phase"],
                    fmt_s(r["step_s"]),
                    fmt_s(r["exposed_comm_s"]),
                    f"{r['sequences_per_s']:,.4g}",
                    f"{r['tokens_per_s_per_chip']:,.0f}",
                    fmt_bytes(r["host_bytes"]),
                ]
            )
        notes = [
            "DRY RUN: every figure modeled (shape-only step on torch's fake process group; nothing measured on hardware).",
            "peak = the shape-only caching allocator's peak allocated (live blocks) on one logical core, the sum of the "
            "categories; its cache (reserved) is in .table and is released by the allocator's retry before an OOM; "
            f"capacity = {self.chip} HBM / "
            f"{self.cores_per_chip} logical cores at LNC={self.lnc} (chips table, trainium-figures.md).",
            "step time: one microbatch (forward, backward, hand-offs) on the cost model's clock × the microbatches, plus "
            "the 1F1B bubble ((pp − 1) microbatch slots) and the optimizer step (gradient reduction, AdamW, parameter "
            "gather); microsteps are identical by assumption. exposed comm: α–β collectives not hidden by compute.",
            f"sequences/s: batch {w.batch} × data-parallel ranks × microbatches per step"
            + (f" (global batch {w.global_batch})" if w.global_batch else "")
            + f" over the step time; tokens/s per chip: × seq {w.seq} over the chips ({self.cores_per_chip} logical "
            "cores each); host memory (assumed): one bf16 copy of the full weights to load the checkpoint.",
        ]
        if self.execution == "graph":
            notes.append(
                "GRAPH: each op priced as a kernel of one compiled graph (no per-op host dispatch or eager launch; the "
                "ops of the eager step, no fusion assumed), as NxD Training's XLA graphs run a step."
            )
        if self.profiler_bytes:
            notes.append(
                f"PROFILED: the capacity is {fmt_bytes(self.profiler_bytes)} lower, the HBM the profiler's "
                f"ProfileMode.DEVICE holds on {self.chip} (Neuron docs, how-to-profile-pytorch; per device, assumed)."
            )
        if self.extrapolated is not None:
            d1, d2, full = self.extrapolated
            notes.append(
                f"EXTRAPOLATED: each layout was dry-run at {d1} and {d2} decoder layers; memory, time and communication "
                f"are those two runs' straight line at the model's {full} layers (modeled, and linear in depth by assumption)."
            )
        notes += sorted({n for n in self.table["note"] if n})
        parts: list[Result] = [
            Table(
                f"plan: {self.model} training step on {self.chip} (LNC={self.lnc}, {self.execution})",
                COLUMNS,
                rows,
                notes,
            )
        ]
        if self.best is None:
            parts.append(
                Message("no candidate layout fits (modeled): add ranks, activation checkpointing or TP", "warning")
            )
        return parts


def plan(
    model: Any,
    workload: Workload | None = None,
    *,
    chip: str = "trn2",
    lnc: int | None = None,
    layouts: list[Layout] | str | None = None,
    dtype: torch.dtype = torch.bfloat16,
    depths: tuple[int, int] | None = None,
    profile: bool = False,
    execution: str = "eager",
) -> PlanResult:
    """Dry-run a training step of ``model`` under each layout; the table says which fit (see the module docstring).

    ``model``: a ``transformers`` config, a fidelity ``ModelSpec`` or a factory ``() -> nn.Module`` (built
    inside each dry run on ``neuron``). ``chip``: ``trn2`` (default), ``trn3``, ``trn1`` or ``trn1n`` (Trainium on
    trn1.32xlarge / trn1n.32xlarge: NeuronLink-v2 and EFA of that instance). ``lnc``: the logical NeuronCore
    config, default the chip's (2 on Trn2/Trn3; Trn1 has 1 only). ``layouts``: :class:`Layout` objects or a string for
    :func:`parse_layouts` (default :data:`DEFAULT_LAYOUTS`). Raises ``ValueError`` for an unknown chip, an LNC
    the chip does not offer, a layout the model cannot take; ``TypeError`` for a model of another kind;
    ``RuntimeError`` if a process group already exists (the dry runs build their own fake one).

    ``depths=(d1, d2)`` (a config only): run each layout at ``d1`` and ``d2`` decoder layers and extrapolate
    every figure linearly to the config's depth (faster; the table says EXTRAPOLATED). Default: full size.

    ``execution``: ``"eager"`` (default; every op dispatched and launched on its own, as TorchNeuron's eager
    mode) or ``"graph"`` (the step as compiled graphs run it, as NxD Training's XLA graphs do: the same ops priced
    as kernels of one graph, without per-op dispatch or launch; no fusion is assumed). Raises ``ValueError`` for
    another value.

    ``profile=True``: plan the step under ``torch.profiler`` with ``ProfileMode.DEVICE``, whose buffers hold HBM
    (about 5 GB on trn2): each layout's capacity is that much lower. Raises ``ValueError`` on a chip with no
    published figure for it.
    """
    if execution not in ("eager", "graph"):
        raise ValueError(f"execution must be 'eager' or 'graph', got {execution!r}")
    spec = get_chip_spec(chip)
    lnc = spec.lnc if lnc is None else lnc
    if lnc not in ((1, 2) if spec.logical_grouping else (1,)):
        choices = "1 or 2" if spec.logical_grouping else "1 (NeuronCore-v2 has no logical-core grouping)"
        raise ValueError(f"lnc must be {choices} on {spec.long_name} (logical NeuronCore config), got {lnc!r}")
    spec = with_cores(spec, spec.physical_cores // lnc)
    profiler_bytes = 0
    if profile:
        if spec.profiler_device_mode_bytes is None:
            raise ValueError(
                f"profile=True: no published figure for the HBM ProfileMode.DEVICE holds on {chip} (only trn2's, about "
                "5 GB); plan without it"
            )
        profiler_bytes = spec.profiler_device_mode_bytes
    capacity = spec.device_hbm_bytes - profiler_bytes
    source = ModelSource.of(model)
    if isinstance(layouts, str):
        layouts = parse_layouts(layouts)
    chosen = list(layouts) if layouts is not None else list(DEFAULT_LAYOUTS)
    workload = workload or Workload()
    if depths is None:
        runs = [run_layout(source, layout, workload, spec, dtype, execution) for layout in chosen]
        return PlanResult(
            source.name, workload, spec.name, lnc, capacity, runs, profiler_bytes=profiler_bytes, execution=execution
        )
    d1, d2 = depths
    full = int(getattr(source.config, "num_hidden_layers", 0) or 0)
    if source.config is None or not 0 < d1 < d2 <= full:
        raise ValueError(
            f"depths={depths!r}: give two increasing decoder-layer counts up to the config's num_hidden_layers "
            f"({full or 'a transformers config is needed'})"
        )
    runs, more, rows_at = [], [], []
    for layout in chosen:
        if full % layout.pp or d2 * layout.pp > full:
            raise ValueError(
                f"depths={depths!r} with {layout.name}: each of {layout.pp} stages needs {d2} of the config's "
                f"{full} layers and the layers must split evenly; choose smaller depths"
            )
        runs.append(run_layout(source.with_layers(d1 * layout.pp), layout, workload, spec, dtype, execution))
        more.append(run_layout(source.with_layers(d2 * layout.pp), layout, workload, spec, dtype, execution))
        rows_at.append(full // layout.pp)
    return PlanResult(
        source.name, workload, spec.name, lnc, capacity, runs, (d1, d2, full), more, profiler_bytes=profiler_bytes,
        stage_layers=rows_at, execution=execution,
    )  # fmt: skip


_LINEAR = (
    "peak_reserved", "peak_allocated", *CATEGORIES, "micro_s", "bubble_s", "optimizer_s", "step_s", "comm_s",
    "exposed_comm_s", "host_bytes",
)  # fmt: skip


def _extrapolate(a: dict[str, Any], b: dict[str, Any], d1: int, d2: int, full: int) -> dict[str, Any]:
    """Row ``a`` (at ``d1`` layers) and ``b`` (at ``d2``) on their straight line at ``full`` layers."""
    out = dict(b)
    for k in _LINEAR:
        out[k] = type(b[k])(b[k] + (b[k] - a[k]) * (full - d2) / (d2 - d1))
    return out


__all__ = ["DEFAULT_LAYOUTS", "Layout", "PlanResult", "Workload", "parse_layouts", "plan"]
