"""CacheView: the compiled graphs of the session (compile log) and the persistent cache, with a clear button.

Reads the live backend (``facts.current()``: ``compile_records()``, ``cache_dir()``, ``cache_entries()``):
the simulator's compile log and cache, or TorchNeuron's dynamo metrics and NEFF cache directory (where modeled
times, fused kernels, stages and cache results are n/a). Clearing calls the simulator's ``disk_cache.clear_cache()``
and only when the front end confirmed (the view asks first); TorchNeuron's NEFF cache is never cleared here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

import traitlets

from .. import facts
from ..display import fallback
from ..display.format import COMPILE_STAGES, fmt_compile, fmt_ms, fmt_s, plural
from ..facts.base import NA
from ._base import TrnWidget, esm

if TYPE_CHECKING:
    from ..compiler.compile_log import CompileRecord

STAGES = COMPILE_STAGES
HARDWARE_NOTE = (
    "{backend}: graphs from torch.neuron.get_dynamo_metrics(); modeled times, fused kernels, stages and cache "
    "results are n/a (the 0 values in this view are not measurements), entries from the NEFF cache directory"
)


class GraphRow(TypedDict):
    """One compiled graph, as the view receives it."""

    graph_name: str
    model_name: str
    graph_id: str
    kind: str
    nodes: int
    fused_kernels: int
    cache_result: str
    stage_us: dict[str, float]  # the bar's geometry
    stage_text: dict[str, str]  # each stage's time, formatted once (display.format.fmt_s)
    compile_s: float
    neuron_compile_s: float | None  # modeled Neuron compile of this graph from cold (None: no count)
    compile_text: str  # measured beside modeled, formatted once (display.format.fmt_compile)
    modeled_device_ms: float
    modeled_device_text: str  # the "modeled ms" column (display.format.fmt_ms)
    runs: int
    warm_s: float
    options: list[list[str]]  # [key, requested value, effective status]
    graph_breaks: list[dict[str, str]]
    recompile_reasons: list[str]


def _compiler() -> Any:
    import trn_notebook.compiler as compiler

    return compiler


def graph_row(entry: CompileRecord) -> GraphRow:
    """A view row of one compile record."""
    requested = dict(entry.requested_options)
    effective = dict(entry.effective_options)
    options = [
        [str(k), str(requested.get(k, "")), str(effective.get(k, ""))] for k in sorted(set(requested) | set(effective))
    ]
    measured = float(entry.compile_s or 0.0)
    neuron = _compiler().compile_time.record_compile_s(entry)
    return GraphRow(
        graph_name=entry.graph_name,
        model_name=entry.model_name,
        graph_id=entry.graph_id,
        kind=entry.kind,
        nodes=entry.graph_node_count,
        fused_kernels=entry.fused_kernels,
        cache_result=entry.cache_result or "",
        stage_us={str(k): float(v) for k, v in entry.stage_us.items()},
        stage_text={str(k): fmt_s(float(v) * 1e-6) for k, v in entry.stage_us.items()},
        compile_s=measured,
        neuron_compile_s=neuron,
        compile_text=fmt_compile(measured, neuron),
        modeled_device_ms=entry.modeled_device_s * 1e3,
        modeled_device_text=fmt_ms(entry.modeled_device_s),
        runs=entry.runs,
        warm_s=entry.warm_s,
        options=options,
        graph_breaks=[
            {"reason": str(b.get("reason", "")), "source": str(b.get("source", ""))} for b in entry.graph_breaks
        ],
        recompile_reasons=[str(r) for r in entry.recompile_reasons],
    )


def totals_of(rows: list[GraphRow], summary: Any = None) -> dict[str, Any]:
    """Cold (compile) vs warm totals over the rows; cache results from the backend's one compile summary
    (``Backend.compile_summary()``; None: the records do not say, shown as n/a)."""
    results: dict[str, int] = summary.by_result if summary is not None else ({NA: len(rows)} if rows else {})
    cold = sum(r["compile_s"] for r in rows)
    warm = sum(r["warm_s"] for r in rows)  # each record's warm_s is its latest run's wall time
    return {
        "graphs": len(rows),
        "cold_s": cold,
        "cold_text": fmt_compile(cold, summary.modeled_neuron_s if summary is not None else None),
        "warm_s": warm,
        "warm_text": fmt_s(warm),
        "runs": sum(r["runs"] for r in rows),
        "results": results,
        "recompiles": sum(1 for r in rows if r["recompile_reasons"]),
        "graph_breaks": sum(len(r["graph_breaks"]) for r in rows),
    }


class CacheView(TrnWidget):
    """Compiled graphs (stages, cache result, modeled time, options), recompile reasons, cold vs warm, clear."""

    _esm = esm("cache.js")

    graphs = traitlets.List().tag(sync=True)
    totals = traitlets.Dict().tag(sync=True)
    cache_dir = traitlets.Unicode("").tag(sync=True)
    disk_entries = traitlets.Int(0).tag(sync=True)
    status = traitlets.Unicode("").tag(sync=True)
    simulated = traitlets.Bool(True).tag(sync=True)  # False: modeled/stage/cache columns are n/a (hardware)

    def __init__(self, **kwargs: Any) -> None:
        self._rows: list[GraphRow] = []
        super().__init__(**kwargs)
        self.guarded("reading the compile log", self.refresh)

    def refresh(self) -> None:
        """Re-read the compile records and the persistent cache index of the live backend."""
        backend = facts.current()
        self._rows = [graph_row(e) for e in backend.compile_records()]
        with self.hold_sync():
            self.graphs = list(self._rows)
            self.totals = totals_of(self._rows, backend.compile_summary())
            self.simulated = backend.is_simulator
            self.cache_dir = str(
                _compiler().disk_cache.cache_dir() if backend.is_simulator else backend.cache_dir() or NA
            )
            self.disk_entries = len(backend.cache_entries())
            if not backend.is_simulator:
                self.status = HARDWARE_NOTE.format(backend=backend.name)
            self.error = ""

    def source_version(self) -> Any:
        """The compile records' version and the cache directory in force (None: unknown, refresh)."""
        backend = facts.current()
        version = backend.compile_version()
        return None if version is None else (version, str(backend.cache_dir()))

    def _on_clear_cache(self, content: dict[str, Any]) -> None:
        if content.get("confirm") is not True:
            raise ValueError("clearing the cache needs confirmation ({'type': 'clear_cache', 'confirm': True})")
        self.clear()

    def clear(self) -> int:
        """Delete our persistent cache entries (``disk_cache.clear_cache()``: only in a marked cache directory); returns how many.

        Raises ``ValueError`` on hardware: the NEFF cache is TorchNeuron's and is never deleted from here.
        """
        backend = facts.current()
        if not backend.is_simulator:
            raise ValueError(
                f"the NEFF cache ({self.cache_dir}) belongs to {backend.name}; remove the directory yourself"
            )
        removed = int(_compiler().disk_cache.clear_cache())
        self.status = f"removed {removed} cache entries from {self.cache_dir}"
        self.refresh()
        return removed

    def fallback_html(self) -> str:
        """The graphs table, recompile reasons and cold/warm totals, escaped."""
        t = self.totals
        sim = self.simulated
        rows = [
            [
                r["graph_name"],
                r["model_name"],
                r["graph_id"][:12],
                r["kind"] or NA,
                r["nodes"],
                r["fused_kernels"] if sim else NA,
                r["cache_result"] or NA,
                r["compile_text"],
                " ".join(f"{k} {v}" for k, v in r["stage_text"].items()) or NA,
                r["modeled_device_text"] if sim else NA,
                r["runs"] if sim else NA,
                "; ".join(f"{k}={req} ({eff})" for k, req, eff in r["options"]),
            ]
            for r in self._rows
        ]
        table = fallback.table(
            [
                "graph",
                "model",
                "id",
                "kind",
                "nodes",
                "fused",
                "cache",
                "compile",
                "stages",
                "modeled ms",
                "runs",
                "options (requested → effective)",
            ],
            rows,
        )
        reasons = [[r["graph_name"], reason] for r in self._rows for reason in r["recompile_reasons"]]
        reasons += [
            [r["graph_name"], f"graph break: {b['reason']} at {b['source']}"]
            for r in self._rows
            for b in r["graph_breaks"]
        ]
        extra = fallback.table(["graph", "recompile reason / graph break"], reasons) if reasons else ""
        summary = (
            f"<p>{plural(t.get('graphs', 0), 'graph')}; cold (compile) {fallback.esc(t.get('cold_text', ''))}, "
            f"warm (latest run of each graph) {fallback.esc(t.get('warm_text', ''))}; {t.get('runs', 0)} runs; "
            f"{plural(self.disk_entries, 'entry', 'entries')} in {fallback.esc(self.cache_dir)}</p>"
        )
        if not sim:
            summary += f"<p>{fallback.esc(self.status)}</p>"
        return fallback.section("Compile cache", table + extra + summary)

    def fallback_text(self) -> str:
        """Totals and one line per graph."""
        t = self.totals
        results = ", ".join(f"{v} {k}" for k, v in sorted(t.get("results", {}).items()))
        lines = [
            f"Compile cache: {plural(t.get('graphs', 0), 'graph')} ({results or 'none'}); cold {t.get('cold_text', '')}, "
            f"warm {t.get('warm_text', '')} (latest run of each graph); {plural(self.disk_entries, 'entry', 'entries')} on disk",
        ]
        if not self.simulated:
            lines.append(f"  {self.status}")
        for r in self._rows[:20]:
            lines.append(
                f"  {r['graph_name']:<28} {r['kind'] or NA:<9} {r['cache_result'] or NA:<11} {r['compile_text']}"
            )
        return "\n".join(lines)
