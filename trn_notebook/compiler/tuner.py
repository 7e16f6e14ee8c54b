"""The bucket tuner: what a policy costs on a length distribution, and a policy for a compile budget.

All figures are modeled and vectorised with numpy (100,000 lengths in a few milliseconds):

* compiles: distinct buckets the lengths land in (one graph each);
* padding waste: padded positions / total positions computed, in percent;
* latency per request: ``graph_launch_s`` + the device time of its bucket's graph; p50/p99 over the
  requests. With ``measured=`` a ``bucketed(...)`` callable, a compiled bucket's device time is its
  graph's own schedule (``modeled_device_s`` of the forward/inference graphs); other buckets are
  scaled from the compiled ones (a least-squares line in the bucket length from two or more, in
  proportion to length from one). Without compiled graphs: ``bucket x per_position_s`` (an assumption);
* cold compile: the **modeled Neuron compile** of the used buckets' graphs (``compile_time.py``: a fixed
  part per graph plus their instruction counts x a per-instruction constant, both fitted on published
  compile times), read from
  the graphs ``measured=`` compiled or loaded, so a cold and a warm cache give the same figure; buckets
  not compiled yet are scaled in proportion to their length. Never this laptop's compile wall time.
  With no compiled graph: ``compile_s`` per graph when given, else ``COMPILE_S_PER_GRAPH`` per graph,
  an assumption (about 2.5 min per block per shape on real hardware, shared/reference/torchneuron.md,
  "Compile times").

``TuneResult.latency_source`` and ``compile_source`` say which of these each figure came from.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..device import costmodel
from .buckets import MAX_BUCKETS, BucketPolicy
from .compile_log import CompileRecord
from .compile_time import DERIVED_FROM, modeled_compile_s

COMPILE_S_PER_GRAPH = 150.0  # assumption: about 2.5 min per block per shape (torchneuron.md, "Compile times")
PER_POSITION_S = 20e-6  # modeled device time per padded position of a small transformer block (assumption)


@dataclass(frozen=True)
class TuneResult:
    """Modeled consequences of a bucket policy on a length distribution."""

    policy: str
    compiles: int
    padding_waste_pct: float
    cold_compile_s: float
    p50_s: float
    p99_s: float
    bucket_counts: dict[int, int] = field(default_factory=dict)
    overflow: int = 0  # lengths above the largest bucket (they would raise at run time)
    latency_source: str = ""
    compile_source: str = ""
    bucket_latency_s: dict[int, float] = field(default_factory=dict)  # per used bucket
    # the Neuron compiler's modeled cold compile of the used buckets (compile_time.py); None: no graph counted
    modeled_neuron_compile_s: float | None = None
    modeled_neuron_source: str = ""
    position_s: float = PER_POSITION_S  # device seconds per padded position (what padding costs a request)

    @property
    def compile_s_per_graph(self) -> float | None:
        """Seconds of one compile under this result's cold-compile figure (None: nothing compiles)."""
        return self.cold_compile_s / self.compiles if self.compiles else None


def _device_s_per_bucket(
    sizes: np.ndarray, facts: dict[int, list[CompileRecord]], per_position_s: float
) -> tuple[np.ndarray, str]:
    """Modeled device seconds of each bucket's graph, and where the figures come from."""
    known = {b: sum(g.modeled_device_s for g in graphs if g.kind != "backward") for b, graphs in facts.items()}
    known = {b: v for b, v in known.items() if v > 0}
    if not known:
        return sizes.astype(np.float64) * per_position_s, (
            f"assumption: {per_position_s * 1e6:g} µs per padded position (no compiled graph to read a schedule from)"
        )
    xs = np.array(sorted(known), dtype=np.float64)
    ys = np.array([known[int(b)] for b in xs])
    if xs.size >= 2:
        slope, intercept = np.polyfit(xs, ys, 1)
        scaled = np.maximum(intercept + slope * sizes, 0.0)
        how = f"scaled by a least-squares line in length through the schedules of buckets {', '.join(str(int(b)) for b in xs)}"
    else:
        scaled = ys[0] * sizes / xs[0]
        how = f"scaled in proportion to length from bucket {int(xs[0])}'s schedule"
    out = np.array([known.get(int(b), scaled[i]) for i, b in enumerate(sizes)], dtype=np.float64)
    exact = [int(b) for b in sizes if int(b) in known]
    other = [int(b) for b in sizes if int(b) not in known]
    text = f"compiled schedule for buckets {', '.join(map(str, exact))}" if exact else ""
    if other:
        text += ("; " if text else "") + f"{how} for {', '.join(map(str, other))}"
    return out, text


def _as_counts(lengths: Any) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(lengths, dict):
        values: np.ndarray[Any, Any] = np.fromiter((int(k) for k in lengths), dtype=np.int64, count=len(lengths))
        counts: np.ndarray[Any, Any] = np.fromiter(
            (int(v) for v in lengths.values()), dtype=np.int64, count=len(lengths)
        )
        return values, counts
    arr = np.asarray(getattr(lengths, "to_numpy", lambda: lengths)(), dtype=np.int64).ravel()
    values, counts = np.unique(arr, return_counts=True)
    return values, counts.astype(np.int64)


def _weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    if values.size == 0:
        return 0.0
    order = np.argsort(values, kind="stable")
    v, w = values[order], weights[order]
    cum: np.ndarray[Any, Any] = np.cumsum(w)
    i = int(np.searchsorted(cum, q * cum[-1], side="left"))
    return float(v[min(i, v.size - 1)])


def tune(
    policy: BucketPolicy | str,
    lengths: Any,
    *,
    compile_s: float | None = None,
    per_position_s: float = PER_POSITION_S,
    measured: Any = None,
) -> TuneResult:
    """Model ``policy`` on ``lengths`` (sequence, numpy array, pandas Series, or {length: count}).

    ``measured`` (a ``bucketed(...)`` callable) supplies compiled schedules and measured compile
    times (see the module docs). Raises ``ValueError`` for a bad policy spec or negative lengths.
    """
    pol = BucketPolicy.parse(policy) if isinstance(policy, str) else policy
    values, counts = _as_counts(lengths)
    if values.size and values.min() < 0:
        raise ValueError("lengths must be non-negative")
    sizes: np.ndarray[Any, Any] = np.asarray(pol.sizes, dtype=np.int64)
    idx = np.asarray(np.searchsorted(sizes, values, side="left"), dtype=np.int64)
    ok = idx < sizes.size
    overflow = int(counts[~ok].sum())
    values, counts, idx = values[ok], counts[ok], idx[ok]
    buckets = sizes[idx]
    per_bucket: np.ndarray[Any, Any] = np.bincount(idx, weights=counts, minlength=sizes.size).astype(np.int64)
    used = per_bucket > 0
    total_padded = float((buckets * counts).sum())
    real = float((values * counts).sum())
    waste = 100.0 * (total_padded - real) / total_padded if total_padded else 0.0
    facts: dict[int, list[CompileRecord]] = dict(getattr(measured, "compiled_buckets", None) or {})
    launch = costmodel.get_cost_constants().graph_launch_s
    device_s, latency_source = _device_s_per_bucket(sizes, facts, per_position_s)
    latency = launch + device_s[idx]
    n_compiles = int(used.sum())
    neuron, neuron_source = _neuron_compile(sizes[used], facts)
    cold, compile_source = _cold_compile(len(sizes[used]), neuron, neuron_source, compile_s)
    return TuneResult(
        policy=str(pol),
        compiles=n_compiles,
        padding_waste_pct=waste,
        cold_compile_s=cold,
        p50_s=_weighted_quantile(latency, counts, 0.50),
        p99_s=_weighted_quantile(latency, counts, 0.99),
        bucket_counts={int(b): int(c) for b, c in zip(sizes[used], per_bucket[used])},
        overflow=overflow,
        latency_source=f"graph launch {launch * 1e6:g} µs + device time: {latency_source}",
        compile_source=compile_source,
        bucket_latency_s={int(b): float(launch + device_s[i]) for i, b in enumerate(sizes) if used[i]},
        modeled_neuron_compile_s=neuron,
        modeled_neuron_source=neuron_source,
        position_s=_position_s(sizes[used], device_s[used], per_bucket[used], per_position_s),
    )


def _position_s(sizes: np.ndarray, device_s: np.ndarray, requests: np.ndarray, default: float) -> float:
    """Device seconds per position of the used buckets' graphs, weighted by the requests each serves."""
    if not sizes.size or not requests.sum():
        return default
    return float(np.average(device_s / np.maximum(sizes, 1), weights=requests))


def _neuron_compile(used: np.ndarray, facts: dict[int, list[CompileRecord]]) -> tuple[float | None, str]:
    """Modeled Neuron compile seconds of the used buckets' graphs from cold: a compiled bucket's graphs by
    their instruction count; another bucket as many graphs as a compiled one, its instructions in proportion
    to its length (the fixed part per graph does not scale with length)."""
    counted: dict[int, tuple[int, float]] = {}  # bucket -> (graphs, instructions)
    for b, graphs in facts.items():
        counts = [float(n) for g in graphs if (n := g.extra.get("neuron_instructions")) is not None]
        if counts:
            counted[b] = (len(counts), math.fsum(counts))
    if not counted:
        return None, "no compiled graph of this policy to count instructions from"
    graphs_per_bucket = sum(g for g, _ in counted.values()) / len(counted)
    per_position = sum(n for _, n in counted.values()) / sum(counted)

    def bucket_s(b: int) -> float:
        if b in counted:
            return modeled_compile_s(counted[b][1], counted[b][0])
        return modeled_compile_s(per_position * b, 1) * graphs_per_bucket

    total = math.fsum(bucket_s(int(b)) for b in used)
    text = f"modeled from the instructions of buckets {', '.join(map(str, sorted(counted)))}"
    if any(int(b) not in counted for b in used):
        text += "; other buckets in proportion to their length"
    return total, text


def _cold_compile(n_used: int, neuron: float | None, neuron_source: str, compile_s: float | None) -> tuple[float, str]:
    """Seconds to compile the used buckets' graphs from cold, and where the figure comes from: the
    modeled Neuron compile when a graph was compiled, else ``compile_s`` (given) or the assumption."""
    if neuron is not None:
        return (
            neuron,
            f"modeled Neuron compile: {neuron_source} (a fixed part per graph + a part per instruction, fitted on {DERIVED_FROM})",
        )
    if compile_s is not None:
        return n_used * compile_s, f"given: {compile_s:g} s per graph"
    return n_used * COMPILE_S_PER_GRAPH, (
        f"assumed: {COMPILE_S_PER_GRAPH:g} s per graph (about 2.5 min per block per shape on real hardware, "
        "torchneuron.md 'Compile times'; no compiled graph of this policy to model the Neuron compile from)"
    )


def suggest_policy(
    lengths: Any,
    max_compiles: int,
    *,
    compile_s: float | None = None,
    position_s: float = PER_POSITION_S,
    requests: float | None = None,
) -> BucketPolicy:
    """The explicit policy of at most ``max_compiles`` buckets for ``lengths``.

    Without ``compile_s``: the least padding within the budget. With ``compile_s`` (seconds per compiled
    graph, e.g. the modeled Neuron compile) the number of buckets is chosen too: the fewest total seconds of
    ``compiles x compile_s`` plus the padded positions' device time (``position_s`` each) over ``requests``
    requests shaped like ``lengths`` (default: as many as it counts). A compile that costs seconds buys far
    fewer buckets than one that costs milliseconds. Optimal 1-D partition by dynamic programming over the
    distinct lengths (rounded up to a multiple of 8, or of a coarser step keeping at most 512 distinct values,
    when there are more than 512 of them). Raises ``ValueError`` for an empty distribution, a budget outside
    1..``MAX_BUCKETS`` or a negative cost.
    """
    try:
        max_compiles = operator.index(max_compiles)
    except TypeError:
        max_compiles = 0
    if not 1 <= max_compiles <= MAX_BUCKETS:
        raise ValueError(f"max_compiles must be an integer from 1 to {MAX_BUCKETS}, got {max_compiles!r}")
    if (compile_s is not None and compile_s < 0) or position_s < 0 or (requests is not None and requests <= 0):
        raise ValueError(f"costs must be non-negative and requests positive ({compile_s=}, {position_s=}, {requests=})")
    values, counts = _as_counts(lengths)
    keep = values > 0
    values, counts = values[keep], counts[keep]
    if values.size == 0:
        raise ValueError("no positive lengths to suggest buckets for")
    if values.size > 512:
        q = max(8, -(-int(values[-1] - values[0] + 1) // 512))
        values = -(-values // q) * q
        values, inv = np.unique(values, return_inverse=True)
        counts = np.bincount(inv, weights=counts).astype(np.int64)
    n = values.size
    k = min(max_compiles, n)
    cw = np.concatenate([[0], np.cumsum(counts)]).astype(np.float64)
    cv = np.concatenate([[0], np.cumsum(values * counts)]).astype(np.float64)
    # cost[i, j]: padding of lengths i..j (inclusive) padded to values[j]
    i = np.arange(n)[:, None]
    j = np.arange(n)[None, :]
    cost = values[None, :] * (cw[j + 1] - cw[i]) - (cv[j + 1] - cv[i])
    cost = np.where(j >= i, cost, np.inf)
    best = cost[0].copy()  # best[j]: least padding covering 0..j with one bucket ending at j
    padding = [float(best[-1])]  # padding[m]: least padding of the whole range with at most m + 1 buckets
    choice = [np.zeros(n, dtype=np.int64)]
    for _ in range(1, k):
        # new[j] = min over split s < j of best[s] + cost[s+1, j]
        cand = best[:-1, None] + cost[1:, :]
        arg = np.argmin(cand, axis=0)
        new = cand[arg, np.arange(n)]
        improved = new < best
        best = np.where(improved, new, best)
        choice.append(np.where(improved, arg, -1))
        padding.append(float(best[-1]))
    top = len(choice) - 1
    if compile_s is not None:
        scale = (requests if requests is not None else float(cw[-1])) / float(cw[-1])
        totals = [(m + 1) * compile_s + pad * position_s * scale for m, pad in enumerate(padding)]
        top = int(np.argmin(totals))  # the first minimum: fewer compiles on a tie
    sizes = [int(values[-1])]
    end, level = n - 1, top
    while level > 0:
        s = choice[level][end]
        if s >= 0:
            sizes.append(int(values[s]))
            end = int(s)
        level -= 1
    return BucketPolicy.explicit(sorted(set(sizes)))
