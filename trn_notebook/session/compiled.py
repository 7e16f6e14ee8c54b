"""Compile a notebook cell with the neuron backend and run it (``%%trn compile``).

:func:`compile_cell` rewrites the cell into a function (``cellfunc``), compiles it with
``trn_notebook.compiler.compile`` once per (source, options), runs it with the notebook's values and
writes the results back. Re-running the same cell reuses the compiled function, so the compiler's
own guards decide whether a new input shape needs a new graph (the compile log says why). The
namespace is only written after a successful run: an error or a KeyboardInterrupt leaves it, and
this module's cache, as they were.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from .. import facts
from .. import state as _state
from ..display.format import COMPILE_STAGE_LABELS, fmt_compile
from ..display.results import Card, Result, Table, fmt_s
from ..facts.base import NA, NOT_MEASURED
from .cellfunc import VALUE_NAME, CellFunction, rewrite_cell

if TYPE_CHECKING:
    from ..compiler.compile_log import CompileRecord, CompileSummary

ProgressFn = Callable[[str, float, str], None]
SourceFn = Callable[[str], str]


class CellInputError(ValueError):
    """The cell's options do not fit its inputs (raised before anything is compiled or run)."""


@dataclass
class CompiledCell:
    """A cell compiled once and reused: the compiled callable and its call history."""

    name: str
    cell: CellFunction
    fn: Callable[..., Any]
    options: dict[str, Any]
    calls: int = 0
    cold_s: float = 0.0
    last_s: float = 0.0


_cache: dict[tuple[Any, ...], CompiledCell] = {}
_by_name: dict[str, CompiledCell] = {}
_state.register("compiled_cells", _state.Globals(__name__, "_cache", "_by_name"), reset="compiled")


def compiled_cells() -> dict[str, CompiledCell]:
    """Compiled cells by name, oldest first (the names ``%trn explain`` and ``%trn shapes`` accept)."""
    return dict(_by_name)


def clear_compiled_cells() -> None:
    """Forget every compiled cell (the next run of a cell compiles again)."""
    _cache.clear()
    _by_name.clear()


@dataclass(repr=False)
class CompileReport(Result):
    """What running a compiled cell did: graphs, cache result, breaks, recompile reasons, times."""

    name: str
    params: tuple[str, ...]
    results: tuple[str, ...]
    entries: list[CompileRecord]
    reused: bool
    call_s: float
    cold_s: float
    device_s: float | None  # None: not modeled (hardware)
    describe_source: SourceFn | None = None
    value: Any = None
    notes: list[str] = field(default_factory=list)

    @property
    def graph_breaks(self) -> list[dict[str, str]]:
        """Graph breaks of the graphs compiled by this run, with their (cell-aware) source."""
        fmt = self.describe_source or (lambda s: s)
        return [
            {"reason": str(b.get("reason", "")), "source": fmt(str(b.get("source", "")))}
            for e in self.entries
            for b in e.graph_breaks
        ]

    @property
    def recompile_reasons(self) -> list[str]:
        """Why the compiler compiled again (e.g. a guard on an input shape failed)."""
        return [r for e in self.entries for r in e.recompile_reasons]

    @property
    def cache_result(self) -> str:
        """``"reused"`` when nothing was compiled, else the compile log's results (``"miss"``, ``"disk hit"``)."""
        if not self.entries:
            return "reused (in-memory hit: no new graph)"
        summary = self.summary
        counts: dict[str, int] = {**summary.by_result, **({NA: summary.unknown} if summary.unknown else {})}
        return ", ".join(f"{k} ×{v}" for k, v in counts.items())

    @property
    def summary(self) -> CompileSummary:
        """Cache results and compile seconds of the graphs this run compiled (the compile log's one rule)."""
        from ..compiler.compile_log import CompileSummary

        return CompileSummary.of(self.entries)

    def compile_text(self) -> str:
        """Total compile time and what it was spent on (a cache hit skips lowering and passes, not tracing)."""
        total = self.summary.compile_s
        stages: dict[str, float] = {}
        for e in self.entries:
            for k, us in e.stage_us.items():
                stages[k] = stages.get(k, 0.0) + float(us) / 1e6
        shown = [f"{STAGE_LABELS.get(k, k)} {fmt_s(v)}" for k, v in stages.items() if v > 0]
        why = (
            "; a cache hit skips lowering and passes, but dynamo must still trace the code" if self.summary.hits else ""
        )
        text = fmt_compile(total, self.summary.modeled_neuron_s) if self.summary.misses else fmt_s(total)
        return text + (f" ({' · '.join(shown)}{why})" if shown else "")

    def parts(self) -> list[Result]:
        kinds: dict[str, int] = {}
        for e in self.entries:
            kind = e.kind or e.graph_name or NA
            kinds[kind] = kinds.get(kind, 0) + 1
        graphs = ", ".join(f"{v} {k}" for k, v in kinds.items()) if kinds else "none (reused)"
        timing = (
            f"warm {fmt_s(self.call_s)} (this run) · cold {fmt_s(self.cold_s)} (first run, compile + run)"
            if self.reused
            else f"this run {fmt_s(self.call_s)} (compile + run)"
            + (f" · cold {fmt_s(self.cold_s)} (first run)" if self.cold_s != self.call_s else "")
        )
        fields: list[tuple[str, object]] = [
            ("inputs", ", ".join(self.params) or "(none)"),
            ("results", ", ".join(self.results) or "(none)"),
            ("graphs captured", graphs),
            ("cache", self.cache_result),
            ("time", timing),
            ("modeled device time", NOT_MEASURED if self.device_s is None else fmt_s(self.device_s)),
        ]
        if self.entries:
            fields.insert(4, ("compile time", self.compile_text()))
        for reason in self.recompile_reasons:
            fields.append(("recompiled because", reason))
        out: list[Result] = [Card(f"%%trn compile: {self.name}", fields, self.notes)]
        breaks = self.graph_breaks
        if breaks:
            rows = [(_short(b["reason"]), b["source"]) for b in breaks]
            out.append(Table("graph breaks", ["reason", "source"], rows, ["full reasons: report.graph_breaks"]))
        return out


STAGE_LABELS = COMPILE_STAGE_LABELS


def _short(reason: str, limit: int = 160) -> str:
    """The first part of a graph-break reason (dynamo's hints and debug context dropped)."""
    head = reason.split(" Hint:")[0].split(" Explanation:")[0].strip()
    return head if len(head) <= limit else head[: limit - 1] + "…"


def parse_options(pairs: list[str]) -> dict[str, Any]:
    """``["k=v", …]`` to a dict, values read as bool, int, float or str; ``ValueError`` if malformed."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key or not re.fullmatch(r"[A-Za-z_][\w.]*", key):
            raise ValueError(f"malformed option {pair!r}: expected KEY=VALUE, e.g. --option max_fusion_size=64")
        value: Any = raw
        if raw.lower() in ("true", "false"):
            value = raw.lower() == "true"
        else:
            for conv in (int, float):
                try:
                    value = conv(raw)
                    break
                except ValueError:
                    pass
        out[key] = value
    return out


def default_name(source: str) -> str:
    """The name a cell gets without ``--name``: ``cell_`` and a short hash of its source."""
    return "cell_" + hashlib.sha1(source.encode()).hexdigest()[:6]


def _record_key(record: CompileRecord) -> tuple[Any, ...]:
    return (record.graph_id, record.kind, record.timestamp)


def _compile_records() -> list[CompileRecord]:
    return facts.current().compile_records()


def _cell_lines(exc: BaseException, filename: str, describe_source: SourceFn | None) -> BaseException:
    """``exc`` with ``filename:line`` in its message replaced by ``cell [N] line L`` (same type)."""
    text = str(exc)
    if describe_source is None or filename not in text:
        return exc
    text = re.sub(re.escape(filename) + r":(\d+)", lambda m: describe_source(f"{filename}:{m.group(1)}"), text)
    try:
        return type(exc)(text)
    except Exception:
        return exc


def _build(
    cell: CellFunction, namespace: dict[str, Any], name: str, fullgraph: bool, mode: str | None,
    options: dict[str, Any], buckets: Any, bucket_dims: dict[str, int] | None,
) -> Callable[..., Any]:  # fmt: skip
    from .. import compiler

    raw = cell.make(namespace)
    raw.__name__ = raw.__qualname__ = name
    if not facts.current().is_simulator:  # TorchNeuron's compiler: backend="neuron" resolves to it
        if buckets is not None:
            raise CellInputError(
                "--buckets is simulator-only (trn_notebook.bucketed); on hardware pad the inputs to fixed bucket "
                "lengths yourself, then compile"
            )
        try:
            compiled: Callable[..., Any] = torch.compile(
                raw, backend="neuron", fullgraph=fullgraph, mode=mode, options=options or None, dynamic=False
            )
        except (TypeError, ValueError, RuntimeError) as exc:  # e.g. both --mode and --option
            raise CellInputError(str(exc)) from None
        return compiled
    try:
        if buckets is not None:  # the bucketed wrapper compiles the function itself, one graph per bucket
            if fullgraph or mode or options:
                raise CellInputError("--buckets cannot be combined with --fullgraph, --mode or --option yet")
            return compiler.bucketed(raw, dims=bucket_dims or {}, policy=buckets)
        return compiler.compile(raw, fullgraph=fullgraph, mode=mode, options=options or None)
    except (TypeError, ValueError) as exc:  # options, mode or dims the compiler refuses, before anything ran
        raise CellInputError(str(exc)) from None


def compile_cell(
    source: str,
    namespace: dict[str, Any],
    *,
    fullgraph: bool = False,
    name: str | None = None,
    mode: str | None = None,
    options: dict[str, Any] | None = None,
    buckets: str | None = None,
    bucket_dims: dict[str, int] | None = None,
    filename: str = "<trn cell>",
    first_line: int = 1,
    on_progress: ProgressFn | None = None,
    describe_source: SourceFn | None = None,
) -> CompileReport:
    """Compile cell ``source`` (once per source and options), run it on ``namespace``, write results back.

    ``buckets`` is a bucket spec (``"pow2:128-2048"``) applied to the dims in ``bucket_dims``
    (parameter name -> dim; default: dim 1 of every tensor input with two or more dims).
    ``on_progress(stage, elapsed_s, graph_name)`` receives the compiler's stage events.
    Raises ``CellRewriteError`` for cells that cannot become a function, ``CellInputError`` for a bad
    bucket spec, ``SyntaxError``, and whatever the cell or the compiler raises (namespace untouched).
    """
    from .. import compiler

    options = dict(options or {})
    try:
        policy = compiler.BucketPolicy.parse(buckets) if buckets else None
    except ValueError as exc:
        raise CellInputError(f"bad bucket spec {buckets!r}: {exc}") from None
    cell = rewrite_cell(source, namespace, filename, first_line=first_line)
    name = name or default_name(source)
    args = [namespace[p] for p in cell.params]
    if policy is not None and bucket_dims is None:
        bucket_dims = {p: 1 for p, a in zip(cell.params, args) if getattr(a, "ndim", 0) >= 2}
        if not bucket_dims:
            raise CellInputError("--buckets needs an input tensor with at least 2 dims (dim 1 is bucketed)")
    key = (
        source, fullgraph, name, mode, tuple(sorted(options.items())), buckets,
        tuple(sorted((bucket_dims or {}).items())), cell.params, id(namespace),
    )  # fmt: skip
    entry = _cache.get(key)
    fresh = entry is None
    fn = entry.fn if entry is not None else _build(cell, namespace, name, fullgraph, mode, options, policy, bucket_dims)
    seen = {_record_key(r) for r in _compile_records()}
    device_before = facts.current().device_time_s()
    if on_progress is not None:
        compiler.progress.add_listener(on_progress)
    try:
        t0 = time.perf_counter()
        out = fn(*args)
        call_s = time.perf_counter() - t0
    except compiler.GraphBreakError as exc:
        raise _cell_lines(exc, filename, describe_source) from None  # the message has it all; drop dynamo internals
    finally:
        if on_progress is not None:
            compiler.progress.remove_listener(on_progress)
    if entry is None:
        entry = CompiledCell(name=name, cell=cell, fn=fn, options=options, cold_s=call_s)
        _cache[key] = entry
    _by_name.pop(name, None)
    _by_name[name] = entry
    entry.calls += 1
    entry.last_s = call_s
    names = cell.results + ((VALUE_NAME,) if cell.has_value else ())
    values = dict(zip(names, out))
    value = values.pop(VALUE_NAME, None)
    namespace.update(values)
    entries = [r for r in _compile_records() if _record_key(r) not in seen]
    return CompileReport(
        name=name,
        params=cell.params,
        results=cell.results,
        entries=entries,
        reused=not fresh and not entries,
        call_s=call_s,
        cold_s=entry.cold_s,
        device_s=_since(device_before),
        describe_source=describe_source,
        value=value,
        notes=_input_notes(cell.params, args),
    )


def _since(before: float | None) -> float | None:
    """Modeled device seconds since ``before`` (None on a backend that does not model device time)."""
    now = facts.current().device_time_s()
    return None if now is None or before is None else now - before


def _input_notes(params: tuple[str, ...], args: list[Any]) -> list[str]:
    """A hint when every tensor input lives on the CPU (the graph then runs on no device time)."""
    tensors = [p for p, a in zip(params, args) if isinstance(a, torch.Tensor)]
    if tensors and not any(a.device.type == "neuron" for a in args if isinstance(a, torch.Tensor)):
        return [
            f"the inputs ({', '.join(tensors)}) are CPU tensors: create them after `%trn device neuron` "
            "or move them with .to('neuron') to run on the device"
        ]
    return []
