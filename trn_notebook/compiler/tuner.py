"""The bucket tuner: what a policy costs on a length distribution, and a policy for a compile budget.

All figures are modeled and vectorised with numpy (100,000 lengths in a few milliseconds):

* compiles: distinct buckets the lengths land in (one graph each);
* padding waste: padded positions / total positions computed, in percent;
* cold compile: ``compiles x COMPILE_S_PER_GRAPH``. Source: about 2.5 min per block per shape on
  real hardware (shared/reference/torchneuron.md, "Compile times"); override with ``compile_s``;
* latency: ``graph_launch_s + bucket x per_position_s`` per request; p50/p99 over the requests.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..device import costmodel
from .buckets import MAX_BUCKETS, BucketPolicy

COMPILE_S_PER_GRAPH = 150.0
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


def _as_counts(lengths: Any) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(lengths, dict):
        values = np.fromiter((int(k) for k in lengths), dtype=np.int64, count=len(lengths))
        counts = np.fromiter((int(v) for v in lengths.values()), dtype=np.int64, count=len(lengths))
        return values, counts
    arr = np.asarray(getattr(lengths, "to_numpy", lambda: lengths)(), dtype=np.int64).ravel()
    values, counts = np.unique(arr, return_counts=True)
    return values, counts.astype(np.int64)


def _weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    if values.size == 0:
        return 0.0
    order = np.argsort(values, kind="stable")
    v, w = values[order], weights[order]
    cum = np.cumsum(w)
    i = int(np.searchsorted(cum, q * cum[-1], side="left"))
    return float(v[min(i, v.size - 1)])


def tune(
    policy: BucketPolicy | str,
    lengths: Any,
    *,
    compile_s: float = COMPILE_S_PER_GRAPH,
    per_position_s: float = PER_POSITION_S,
) -> TuneResult:
    """Model ``policy`` on ``lengths`` (sequence, numpy array, pandas Series, or {length: count}).

    Raises ``ValueError`` for a bad policy spec or negative lengths.
    """
    pol = BucketPolicy.parse(policy) if isinstance(policy, str) else policy
    values, counts = _as_counts(lengths)
    if values.size and values.min() < 0:
        raise ValueError("lengths must be non-negative")
    sizes = np.asarray(pol.sizes, dtype=np.int64)
    idx = np.searchsorted(sizes, values, side="left")
    ok = idx < sizes.size
    overflow = int(counts[~ok].sum())
    values, counts, idx = values[ok], counts[ok], idx[ok]
    buckets = sizes[idx]
    per_bucket = np.bincount(idx, weights=counts, minlength=sizes.size).astype(np.int64)
    used = per_bucket > 0
    total_padded = float((buckets * counts).sum())
    real = float((values * counts).sum())
    waste = 100.0 * (total_padded - real) / total_padded if total_padded else 0.0
    launch = costmodel.get_cost_constants().graph_launch_s
    latency = launch + buckets.astype(np.float64) * per_position_s
    n_compiles = int(used.sum())
    return TuneResult(
        policy=str(pol),
        compiles=n_compiles,
        padding_waste_pct=waste,
        cold_compile_s=n_compiles * compile_s,
        p50_s=_weighted_quantile(latency, counts, 0.50),
        p99_s=_weighted_quantile(latency, counts, 0.99),
        bucket_counts={int(b): int(c) for b, c in zip(sizes[used], per_bucket[used])},
        overflow=overflow,
    )


def suggest_policy(lengths: Any, max_compiles: int) -> BucketPolicy:
    """The explicit policy of at most ``max_compiles`` buckets with the least padding on ``lengths``.

    Optimal 1-D partition by dynamic programming over the distinct lengths (rounded up to a
    multiple of 8, or of a coarser step keeping at most 512 distinct values, when there are more
    than 512 of them). Raises ``ValueError`` for an empty distribution or a budget outside
    1..``MAX_BUCKETS``.
    """
    try:
        max_compiles = operator.index(max_compiles)
    except TypeError:
        max_compiles = 0
    if not 1 <= max_compiles <= MAX_BUCKETS:
        raise ValueError(f"max_compiles must be an integer from 1 to {MAX_BUCKETS}, got {max_compiles!r}")
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
    choice = [np.zeros(n, dtype=np.int64)]
    for _ in range(1, k):
        # new[j] = min over split s < j of best[s] + cost[s+1, j]
        cand = best[:-1, None] + cost[1:, :]
        arg = np.argmin(cand, axis=0)
        new = cand[arg, np.arange(n)]
        improved = new < best
        best = np.where(improved, new, best)
        choice.append(np.where(improved, arg, -1))
    sizes = [int(values[-1])]
    j, level = n - 1, len(choice) - 1
    while level > 0:
        s = choice[level][j]
        if s >= 0:
            sizes.append(int(values[s]))
            j = int(s)
        level -= 1
    return BucketPolicy.explicit(sorted(set(sizes)))
