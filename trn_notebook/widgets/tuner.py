"""ShapeTuner: a histogram of observed (or given) lengths, the bucket policy drawn over it, live tuner read-outs.

The lengths are binned in Python with numpy once per data change (refresh or another dimension);
the view only draws. A change of the policy controls builds a candidate with
``BucketPolicy.parse`` and calls ``trn_notebook.compiler.tune`` on a cached array, so a move of a
control costs one ``tune`` call. "Apply" sets the candidate as ``target.policy`` on a
``BucketedCallable``.

With a ``BucketedCallable`` (the target, or the callable of that name among the notebook's
variables) the tuner is given ``measured=`` it: modeled latency comes from the compiled graphs'
own schedules and cold compile is the modeled Neuron compile of those graphs (the same on a cold or a
warm cache; never this laptop's compile wall time); each read-out says which
(``readouts["latency_source"]`` / ``["compile_source"]``, short forms ``latency_from`` /
``compile_from``). Without one they are stated assumptions, labelled as such.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import traitlets

from ..display import fallback
from ..display.format import COMPILE_MODELED_LABEL, fmt_duration, fmt_s, fmt_share
from ._base import TrnWidget, esm

if TYPE_CHECKING:
    from ..compiler.shape_log import ShapeEntry

MAX_BINS = 80
KINDS = ("pow2", "step", "list")
EMPTY = (
    "no lengths yet: call a bucketed callable (trn_notebook.bucketed) on some inputs and press Refresh, "
    "or pass lengths=… to ShapeTuner; the histogram, buckets and read-outs appear here"
)


def _compiler() -> Any:
    """The compiler package (imported lazily: widgets sit above it and must load without it)."""
    import trn_notebook.compiler as compiler

    return compiler


def as_counts(lengths: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(unique lengths, counts)`` as int64 arrays from a sequence, array, Series or dict length->count.

    Raises ``ValueError`` for negative or non-integer lengths.
    """
    if isinstance(lengths, Mapping):
        items = sorted((int(k), int(v)) for k, v in lengths.items() if int(v) > 0)
        values: np.ndarray[Any, Any] = np.fromiter((k for k, _ in items), dtype=np.int64, count=len(items))
        counts: np.ndarray[Any, Any] = np.fromiter((v for _, v in items), dtype=np.int64, count=len(items))
    else:
        arr = np.asarray(lengths)
        if arr.size and not np.issubdtype(arr.dtype, np.integer) and not np.all(np.mod(arr, 1) == 0):
            raise ValueError("lengths must be whole numbers")
        values, counts = np.unique(arr.astype(np.int64).ravel(), return_counts=True)
        counts = counts.astype(np.int64)
    if values.size and values[0] < 0:
        raise ValueError(f"lengths must be >= 0; got {int(values[0])}")
    return values, counts


def histogram(values: np.ndarray, counts: np.ndarray, max_bins: int = MAX_BINS) -> dict[str, Any]:
    """Integer-aligned bins over the observed range: ``{"edges", "counts", "samples", "min", "max"}``."""
    if values.size == 0:
        return {"edges": [], "counts": [], "samples": 0, "min": 0, "max": 0}
    lo, hi = int(values[0]), int(values[-1])
    width = max(1, math.ceil((hi - lo + 1) / max_bins))
    nbins = max(1, math.ceil((hi - lo + 1) / width))
    edges: np.ndarray[Any, Any] = lo + width * np.arange(nbins + 1, dtype=np.int64)
    binned = np.bincount((values - lo) // width, weights=counts, minlength=nbins)[:nbins]
    return {
        "edges": edges.tolist(),
        "counts": binned.astype(np.int64).tolist(),
        "samples": int(counts.sum()),
        "min": lo,
        "max": hi,
    }


def spec_controls(spec: str) -> dict[str, Any]:
    """Control values for a policy spec, read through ``BucketPolicy.parse`` (one grammar for every spec).

    Raises ``ValueError`` (from the parser) for a spec that is not a valid policy.
    """
    policy = _compiler().BucketPolicy.parse(spec)
    sizes = list(policy.sizes)
    lo, hi = sizes[0], sizes[-1]
    if policy.kind == "pow2":
        lo = int(str(policy).split(":", 1)[1].split("-")[0])  # pow2:MIN-MAX keeps its own MIN
        return {"kind": "pow2", "min_len": lo, "max_len": hi}
    if policy.kind == "step":
        return {"kind": "step", "min_len": lo, "max_len": hi, "count": len(sizes)}
    return {"kind": "list", "sizes": ",".join(map(str, sizes)), "min_len": lo, "max_len": hi}


def controls_spec(kind: str, min_len: int, max_len: int, count: int, sizes: str) -> str:
    """The policy spec the controls describe (``count`` buckets for ``step``: the step is derived)."""
    if kind == "pow2":
        return f"pow2:{min_len}-{max_len}"
    if kind == "step":
        step = max(1, math.ceil((max_len - min_len) / max(count - 1, 1)))
        return f"step:{step}:{min_len}-{min_len + step * max(count - 1, 0)}"
    if kind == "list":
        return "list:" + ",".join(s.strip() for s in sizes.split(",") if s.strip())
    raise ValueError(f"unknown policy kind {kind!r}; valid: {', '.join(KINDS)}")


def readout_texts(result: Any) -> dict[str, str]:
    """The read-out cards' figures as shown, formatted once (display.format), keyed by the readouts' names."""
    seconds = getattr(result, "modeled_neuron_compile_s", None)
    per_graph = result.compile_s_per_graph
    return {
        "padding_waste_pct": fmt_share(float(result.padding_waste_pct) / 100.0),
        "cold_compile_s": fmt_duration(float(result.cold_compile_s)),  # the same figure as the modeled compile
        "neuron_compile_s": fmt_duration(seconds) if seconds is not None else "n/a",
        "p50_s": fmt_s(float(result.p50_s)),
        "p99_s": fmt_s(float(result.p99_s)),
        # the price of one compile that Suggest weighs against padding (its button shows it)
        "compile_per_graph_s": fmt_duration(per_graph) if per_graph is not None else "",
    }


def neuron_compile_text(result: Any) -> str:
    """The tuner result's modeled Neuron cold compile and where it comes from (``n/a`` when not modeled)."""
    seconds = getattr(result, "modeled_neuron_compile_s", None)
    where = getattr(result, "modeled_neuron_source", "")
    return (fmt_duration(seconds) if seconds is not None else "n/a") + (f" ({where})" if where else "")


def source_labels(latency_source: str, compile_source: str) -> dict[str, str]:
    """Short labels of where ``tune``'s latency and cold-compile figures come from (for the cards' titles).

    ``latency_from``: "compiled schedule" when a compiled graph's schedule was read (exact or scaled),
    else "assumption"; ``compile_from``: "modeled" (the modeled Neuron compile of compiled graphs),
    "given" or "assumed".
    """
    latency = "assumption" if "assumption:" in latency_source else "compiled schedule"
    if compile_source.startswith("modeled"):
        return {"latency_from": latency, "compile_from": "modeled"}
    return {"latency_from": latency, "compile_from": compile_source.split(":", 1)[0].strip() or "assumed"}


def find_bucketed(name: str) -> Any:
    """The ``BucketedCallable`` named ``name`` among the notebook's variables (None outside IPython)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    if shell is None:
        return None
    cls = _compiler().BucketedCallable
    for value in list(shell.user_ns.values()):
        if isinstance(value, cls) and value.name == name:
            return value
    return None


def _pow2_above(n: int) -> int:
    return int(_compiler().buckets._next_pow2(int(n)))


class ShapeTuner(TrnWidget):
    """Observed lengths of a bucketed callable (or a given distribution) against a candidate bucket policy.

    ``target`` is a ``BucketedCallable`` (``trn_notebook.compiler.bucketed``) or a shape-log name;
    ``lengths`` a given distribution (sequence, array, Series or dict length->count), which wins
    over the shape log. "Apply" needs a ``BucketedCallable``: the target, or for a name (or no
    target) the callable of that name among the notebook's variables.
    """

    _esm = esm("tuner.js")

    name = traitlets.Unicode("").tag(sync=True)
    source = traitlets.Unicode("").tag(sync=True)
    dims = traitlets.List().tag(sync=True)
    dim = traitlets.Unicode("").tag(sync=True)
    hist = traitlets.Dict().tag(sync=True)
    range_max = traitlets.Int(1).tag(sync=True)
    kind = traitlets.Unicode("pow2").tag(sync=True)
    min_len = traitlets.Int(1).tag(sync=True)
    max_len = traitlets.Int(1).tag(sync=True)
    count = traitlets.Int(4).tag(sync=True)
    sizes = traitlets.Unicode("").tag(sync=True)
    policy = traitlets.Unicode("").tag(sync=True)
    buckets = traitlets.List().tag(sync=True)
    readouts = traitlets.Dict().tag(sync=True)
    applied = traitlets.Unicode("").tag(sync=True)
    can_apply = traitlets.Bool(False).tag(sync=True)  # a callable to apply to AND a valid, new candidate
    valid = traitlets.Bool(True).tag(sync=True)  # the controls describe a valid policy
    notice = traitlets.Unicode("").tag(sync=True)  # what will appear, when there is nothing to show yet
    callables = traitlets.List().tag(sync=True)  # shape-log names to choose from (no target given)

    def __init__(self, target: Any = None, lengths: Any = None, **kwargs: Any) -> None:
        name = kwargs.pop("name", None)  # ShapeTuner(name="f") == ShapeTuner("f"): a shape-log name
        self._target = target if target is not None or not name else str(name)
        self._given = None if lengths is None else as_counts(lengths)
        self._values: np.ndarray[Any, Any] = np.zeros(0, dtype=np.int64)
        self._counts: np.ndarray[Any, Any] = np.zeros(0, dtype=np.int64)
        self._tune_input: Any = {}
        self._ready = False
        self._controls_for: tuple[str, str] | None = None
        self._refreshing = False
        self._callable: Any = None if target is None or isinstance(target, str) else target
        super().__init__(**kwargs)
        self.guarded("reading the shape log", self.refresh)
        self._ready = True
        self.recompute()
        from ..session.events import cell_finished

        self._unsubscribe = cell_finished.subscribe(self.on_cell_finished)

    # -- data -----------------------------------------------------------------------------------
    def _shape_entry(self) -> ShapeEntry | None:
        name = self._target if isinstance(self._target, str) else getattr(self._target, "name", None)
        snap = _compiler().shape_log.snapshot()
        if self._target is None:  # no target: the one chosen in the view, else the first with observations
            self.callables = sorted(n for n, e in snap.items() if e.observed)
            name = self.name if self.name in snap else next(iter(self.callables), None)
        if name is None:
            return None
        self.name = str(name)
        if self._target is None or isinstance(self._target, str):
            self._callable = find_bucketed(self.name)
        return snap.get(name, _compiler().shape_log.ShapeEntry())

    def refresh(self) -> None:
        """Re-read the shape log (unless a distribution was given), re-bin, and recompute the read-outs."""
        self._refreshing = True
        try:
            self._refresh()
        finally:
            self._refreshing = False
        if self._ready:
            self.recompute()

    def _refresh(self) -> None:
        entry = None
        if self._given is not None:
            self.source = "given distribution"
            if self._target is not None:
                self.name = str(self._target if isinstance(self._target, str) else getattr(self._target, "name", ""))
            values, counts = self._given
        else:
            entry = self._shape_entry()
            observed = entry.observed if entry is not None else {}
            self.dims = sorted(map(str, observed))
            if self.dim not in observed:
                self.dim = self._default_dim(observed)
            self.source = f"shape log: {self.name}" if entry is not None else "shape log: no bucketed callable yet"
            values, counts = as_counts(observed.get(self.dim, {}))
        self._set_data(values, counts, entry)
        self.notice = "" if values.size else EMPTY

    def _default_dim(self, observed: dict[str, dict[Any, int]]) -> str:
        """The bucketed dimension of the target (``input_ids[1]``), else the one with the most distinct lengths."""
        dims = getattr(self._callable, "dims", None)
        if isinstance(dims, Mapping):
            for arg, axis in dims.items():
                key = f"{arg}[{axis}]"
                if key in observed:
                    return key
        return max(sorted(observed), key=lambda k: len(observed[k]), default="")

    def source_version(self) -> Any:
        """The shape log's version (a given distribution never changes, but the policy in force may)."""
        policy = str(getattr(self._callable, "policy", ""))
        # a bucket compiled since (a new schedule or compile time) changes the latency / cold-compile read-outs
        compiled_key = tuple(
            sorted((int(b), len(g)) for b, g in (getattr(self._callable, "compiled_buckets", None) or {}).items())
        )
        if self._given is not None:
            return ("given", policy, compiled_key)
        return getattr(_compiler().shape_log.shape_log, "version", None), policy, compiled_key

    def _set_data(self, values: np.ndarray, counts: np.ndarray, entry: ShapeEntry | None) -> None:
        self._values, self._counts = values, counts
        # tune() takes a dict length->count: cached once per data change, never rebuilt per control move.
        self._tune_input = dict(zip(values.tolist(), counts.tolist()))
        self.hist = histogram(values, counts)
        hi = int(values[-1]) if values.size else 1
        self.range_max = max(2 * _pow2_above(hi), 2)
        in_force = self._policy_in_force(entry)
        self.applied = in_force or ""
        if not self._ready or self._controls_for != (self.name, self.dim):
            self._controls_for = (self.name, self.dim)  # new data: start from the policy in force
            spec = in_force or f"pow2:{max(_pow2_above(int(values[0])), 1) if values.size else 1}-{_pow2_above(hi)}"
            self._set_controls(spec)

    def _policy_in_force(self, entry: ShapeEntry | None) -> str | None:
        policy = getattr(self._callable, "policy", None)
        if policy is not None:
            return str(policy)
        return entry.policy if entry is not None else None

    def _set_controls(self, spec: str) -> None:
        controls = spec_controls(spec)
        ready, self._ready = self._ready, False  # one recompute for the whole set, not one per control
        try:
            for key, value in controls.items():
                setattr(self, key, value)
        finally:
            self._ready = ready
        if ready and not self._refreshing:  # refresh() recomputes once at its end
            self.recompute()

    # -- the tuner ------------------------------------------------------------------------------
    @traitlets.observe("kind", "min_len", "max_len", "count", "sizes")
    def _controls_changed(self, change: dict[str, Any]) -> None:
        if change["name"] == "kind" and change["new"] == "list" and not self.sizes.strip() and self.buckets:
            # An explicit list starts from the current buckets, not from an empty (invalid) box.
            self.sizes = ",".join(str(b) for b in self.buckets)  # observed again: recomputes once
            return
        if self._ready:
            self.recompute()

    @traitlets.observe("dim", "name")
    def _source_changed(self, _change: dict[str, Any]) -> None:
        if self._ready and self._given is None and not self._refreshing:
            self.guarded("refresh", self.refresh)

    def recompute(self) -> bool:
        """Build the candidate policy from the controls and ask ``tune`` for the read-outs.

        An invalid policy is reported as data (``error``) and returns False.
        """
        start = time.perf_counter()
        try:
            compiler = _compiler()
            if self.min_len > self.max_len:
                raise ValueError(f"min {self.min_len} is above max {self.max_len}; lower min or raise max")
            spec = controls_spec(self.kind, self.min_len, self.max_len, self.count, self.sizes)
            policy = compiler.BucketPolicy.parse(spec)
            # measured=: the callable's compiled schedules and this session's compile times (issue 19)
            result = compiler.tune(policy, self._tune_input, measured=self._callable) if self._tune_input else None
        except Exception as exc:
            with self.hold_sync():  # no stale candidate: Apply must never set the previous policy
                self.valid = False
                self.can_apply = False
                self.policy = ""
                self.buckets = []
                self.readouts = {}
            self.report_error(f"{type(exc).__name__}: {exc}")
            return False
        readouts: dict[str, Any] = {}
        if result is not None:
            readouts = {
                "compiles": int(result.compiles),
                "overflow": int(result.overflow),  # lengths above the largest bucket (they would raise)
                "padding_waste_pct": float(result.padding_waste_pct),
                "cold_compile_s": float(result.cold_compile_s),
                "p50_s": float(result.p50_s),
                "p99_s": float(result.p99_s),
                "bucket_counts": {str(k): int(v) for k, v in dict(result.bucket_counts).items()},
                "latency_source": str(result.latency_source),
                "compile_source": str(result.compile_source),
                "neuron_compile_text": neuron_compile_text(result),
                **source_labels(str(result.latency_source), str(result.compile_source)),
            }
        compute_s = time.perf_counter() - start
        readouts["compute_ms"] = compute_s * 1e3
        readouts["text"] = {**(readout_texts(result) if result is not None else {}), "compute_s": fmt_s(compute_s)}
        with self.hold_sync():
            self.policy = str(policy)
            self.buckets = [int(b) for b in policy.buckets()]
            self.readouts = readouts
            self.error = ""
            self.valid = True
            self.can_apply = self._callable is not None and str(policy) != self.applied
        return True

    def on_cell_finished(self, event: Any) -> None:
        """Subscriber of the cell-finished event: keep "in force" and the data current without Refresh."""
        self.refresh_if_changed()

    def _on_apply(self, _content: dict[str, Any]) -> None:
        self.apply()

    def apply(self) -> str:
        """Set the candidate policy on the target ``BucketedCallable``; returns its spec.

        Raises ``TypeError`` if the tuner has no callable to apply to (a name or a given distribution).
        """
        if self._callable is None:
            raise TypeError(
                "apply needs a BucketedCallable target (trn_notebook.compiler.bucketed(...)); "
                f"this tuner shows {self.source or 'nothing'}"
            )
        if not self.valid or not self.policy:
            raise ValueError(f"the controls do not describe a valid policy ({self.error}); fix them before Apply")
        self._callable.policy = _compiler().BucketPolicy.parse(self.policy)
        self.applied = str(self._callable.policy)
        self.can_apply = False  # in force now
        return self.applied

    def _on_suggest(self, content: dict[str, Any]) -> None:
        self.suggest(int(content.get("max_compiles", self.count)))

    def suggest(self, max_compiles: int) -> str:
        """Set the controls to the suggested policy of at most ``max_compiles`` buckets and return it: the
        fewest total seconds of compiles (each priced as the current policy's cold compile per graph, the
        modeled Neuron compile when a graph was compiled) and padding (its device time over the samples).
        Raises ``ValueError`` for a budget outside 1..64 or no samples."""
        compiler = _compiler()
        current = compiler.BucketPolicy.parse(self.policy) if self.policy else None
        result = compiler.tune(current, self._tune_input, measured=self._callable) if current is not None else None
        per_graph = result.compile_s_per_graph if result is not None else None
        position_s = result.position_s if result is not None else compiler.tuner.PER_POSITION_S
        suggested = compiler.suggest_policy(self._tune_input, max_compiles, compile_s=per_graph, position_s=position_s)
        self._set_controls(str(suggested))
        return str(suggested)

    # -- fallbacks ------------------------------------------------------------------------------
    def fallback_html(self) -> str:
        """Histogram with bucket marks and the read-outs, escaped."""
        h = self.hist
        bars = [(h["edges"][i], h["edges"][i + 1], h["counts"][i]) for i in range(len(h.get("counts", [])))]
        chart = fallback.bars_svg(bars, marks=self.buckets)
        r = self.readouts
        rows = [["policy", self.policy], ["in force", self.applied or "none"], ["samples", h.get("samples", 0)]]
        if "compiles" in r:
            rows += [
                ["compiles", r["compiles"]],
                ["padding waste", r["text"]["padding_waste_pct"]],
                ["cold compile", r["text"]["cold_compile_s"]],
                ["cold compile from", r.get("compile_source", "")],
                [COMPILE_MODELED_LABEL, r.get("neuron_compile_text", "")],
                ["Suggest prices one compile at", r["text"]["compile_per_graph_s"] or "n/a"],
                ["modeled p50 / p99", f"{r['text']['p50_s']} / {r['text']['p99_s']}"],
                ["latency from", r.get("latency_source", "")],
            ]
        title = f"Shape buckets: {self.name or self.source}" + (f" ({self.dim})" if self.dim else "")
        return fallback.section(title, chart + fallback.table(["", ""], rows))

    def fallback_text(self) -> str:
        """Policy, samples and read-outs on a few lines."""
        r = self.readouts
        head = f"Shape buckets: {self.name or self.source}: {self.hist.get('samples', 0)} samples, policy {self.policy}"
        if "compiles" not in r:
            return head
        text = r["text"]
        return (
            f"{head}\n  {r['compiles']} compiles, {text['padding_waste_pct']} padding waste, "
            f"cold compile {text['cold_compile_s']}, p50 {text['p50_s']}, "
            f"p99 {text['p99_s']}\n  cold compile from: {r.get('compile_source', '')}"
            f"\n  {COMPILE_MODELED_LABEL}: {r.get('neuron_compile_text', '')}"
            f"\n  latency from: {r.get('latency_source', '')}"
            f"\n  Suggest prices one compile at {text['compile_per_graph_s'] or 'n/a'}"
        )
