"""Warm-up of a bucket policy: compile every bucket ahead of time, with a progress bar and a summary.

A rare long request that lands in a bucket never compiled costs a cold compile in the middle of
serving (the seed article's warning). :func:`warmup` runs the bucketed callable once per bucket
— on the caller's example arguments padded or cut to each bucket, or on zeros shaped like its
last call — so every graph is compiled (or loaded from the cache) before the first request. It
runs in the grad mode in force: under ``torch.no_grad()`` it compiles inference graphs; with
grad enabled the forward graphs of training (the backward graph compiles at its first backward).
Warm-up calls are not counted in the shape log (it records real traffic).
"""

from __future__ import annotations

import html
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from ..presentation import fmt_compile
from . import cache
from .compile_log import CompileSummary, compile_log

if TYPE_CHECKING:
    from .buckets import BucketedCallable


@dataclass(frozen=True)
class WarmupSummary:
    """What a warm-up did: graphs per cache result, wall seconds, and the cache bytes of those graphs."""

    name: str
    policy: str
    buckets: tuple[int, ...]
    graphs: int
    results: dict[str, int] = field(default_factory=dict)
    compile_s: float = 0.0  # sum of the graphs' measured compile times
    seconds: float = 0.0  # wall time of the whole warm-up
    cache_bytes: int = 0
    # modeled Neuron compile seconds of the graphs compiled from cold (None: none was, or no count)
    modeled_neuron_s: float | None = None

    def __str__(self) -> str:
        results = ", ".join(f"{n} {r}" for r, n in sorted(self.results.items())) or "none"
        return (
            f"warm-up of {self.name} ({self.policy}): {len(self.buckets)} buckets, {self.graphs} graphs "
            f"({results}), compile {fmt_compile(self.compile_s, self.modeled_neuron_s)}, wall {self.seconds:.2f} s, "
            f"{self.cache_bytes} bytes in the compile cache"
        )

    def _repr_html_(self) -> str:
        return f"<p class='trn-warmup'>{html.escape(str(self))}</p>"


class _Progress:
    """A progress bar: an ipywidgets bar inside a kernel, one line per bucket on a terminal."""

    def __init__(self, total: int, title: str) -> None:
        self.total, self.title, self.bar = total, title, None
        try:
            from IPython import get_ipython

            if get_ipython() is not None and hasattr(get_ipython(), "kernel"):
                import ipywidgets
                from IPython.display import display

                self.bar = ipywidgets.IntProgress(value=0, min=0, max=total, description="warm-up")
                self.label = ipywidgets.Label(title)
                display(ipywidgets.HBox([self.bar, self.label]))
        except Exception:  # no widget front end: fall back to text
            self.bar = None

    def update(self, done: int, text: str) -> None:
        if self.bar is not None:
            self.bar.value = done
            self.label.value = text
        else:
            print(f"warm-up [{done}/{self.total}] {text}", file=sys.stderr, flush=True)


def _resized(x: torch.Tensor, dim: int, b: int, pad_value: float) -> torch.Tensor:
    dim = dim % x.dim()
    n = x.shape[dim]
    if n >= b:  # contiguous like a padded call's input, so the compiled graph's guards match
        return x.narrow(dim, 0, b).clone(memory_format=torch.contiguous_format)
    from .buckets import _pad

    return _pad(x, dim, b - n, pad_value)


def _examples(bc: BucketedCallable, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    if args or kwargs:
        return dict(bc._sig.bind_partial(*args, **kwargs).arguments)
    if bc.last_call is None:
        raise ValueError(
            f"warm-up of {bc.name} needs example inputs: pass them (runner.warmup(input_ids)) or call it once first"
        )
    return {
        k: torch.zeros(v[0], dtype=v[1], device=v[2]) if isinstance(v, tuple) and len(v) == 3 else v
        for k, v in bc.last_call.items()
    }


def warmup(bc: BucketedCallable, *args: Any, progress: bool = True, **kwargs: Any) -> WarmupSummary:
    """Compile every bucket of ``bc``'s policy now (see the module docs); raises ``ValueError`` without examples."""
    example = _examples(bc, args, kwargs)
    sizes = bc.policy.buckets()
    first = next(iter(bc.dims))
    base = example.get(first)
    if not isinstance(base, torch.Tensor):
        raise ValueError(f"warm-up of {bc.name}: argument {first!r} of the example is not a tensor")
    true_len = base.shape[bc.dims[first]]
    bar = _Progress(len(sizes), f"{bc.name}: {bc.policy}") if progress else None
    started = time.time()
    t0 = time.perf_counter()
    for i, b in enumerate(sizes):
        values = dict(example)
        for arg, dim in bc.dims.items():
            if isinstance(values.get(arg), torch.Tensor):
                values[arg] = _resized(values[arg], dim, b, bc.pad_value)
        mask = values.get("attention_mask")
        if isinstance(mask, torch.Tensor) and mask.shape[-1] == true_len:
            values["attention_mask"] = _resized(mask, -1, b, 0)
        bc._call((), values, observe=False)
        if bar is not None:
            bar.update(i + 1, f"bucket {b} ({i + 1}/{len(sizes)})")
    seconds = time.perf_counter() - t0
    records = [r for r in compile_log.snapshot() if r.model_name == bc.name and r.timestamp >= started]
    summary = CompileSummary.of(records)
    keys = {r.graph_id for r in records}
    cache_bytes = sum(e["bytes"] for e in cache.cache_entries() if e["key"] in keys)
    return WarmupSummary(
        name=bc.name,
        policy=str(bc.policy),
        buckets=tuple(sizes),
        graphs=len(records),
        results=summary.by_result,
        compile_s=summary.compile_s,
        seconds=seconds,
        cache_bytes=cache_bytes,
        modeled_neuron_s=summary.modeled_neuron_s,
    )
