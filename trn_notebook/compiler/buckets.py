"""Shape buckets: a :class:`BucketPolicy`, :func:`bucketed`, which pads chosen dims up to a bucket, and
:func:`warmup`, which compiles every bucket ahead of time.

A bucketed callable compiles one graph per bucket (static shapes, as the device needs), pads the
chosen dimensions with zeros (and an attention mask when the callable takes ``attention_mask``),
and slices outputs back to the true length, so unpadded positions equal the unbucketed run.

Warm-up: a rare long request that lands in a bucket never compiled costs a cold compile in the middle of
serving (the seed article's warning). :func:`warmup` runs the bucketed callable once per bucket
— on the caller's example arguments padded or cut to each bucket, or on zeros shaped like its
last call — so every graph is compiled (or loaded from the cache) before the first request. It
runs in the grad mode in force: under ``torch.no_grad()`` it compiles inference graphs; with
grad enabled the forward graphs of training (the backward graph compiles at its first backward).
Warm-up calls are not counted in the shape log (it records real traffic).
"""

from __future__ import annotations

import bisect
import functools
import html
import inspect
import re
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from ..display.format import fmt_compile
from . import disk_cache
from .compile_log import CompileRecord, CompileSummary, LiveRecord, compile_log
from .shape_log import shape_log

MAX_BUCKETS = 4096  # one compiled graph each; enough to model "one compile per length" on real length data
MAX_BUCKET_SIZE = 1 << 24  # 16,777,216 positions, far above any model's context
_FORMS = "'pow2:MIN-MAX' (e.g. pow2:128-2048), 'step:STEP:MIN-MAX' (e.g. step:256:256-2048) or 'list:A,B,C' (e.g. list:128,512,2048)"


@dataclass(frozen=True)
class BucketPolicy:
    """Sorted bucket sizes plus the spec they came from (``str(policy)`` is the spec)."""

    kind: str
    sizes: tuple[int, ...]
    spec: str

    @classmethod
    def pow2(cls, min: int, max: int) -> BucketPolicy:
        """Powers of two from ``min`` to ``max`` (``max`` added if it is not one); raises ``ValueError``."""
        _check_bounds(min, max)
        sizes = []
        p = 1
        while p <= max:
            if p >= min:
                sizes.append(p)
            p *= 2
        if not sizes or sizes[-1] != max:
            sizes.append(max)
        return cls("pow2", tuple(sizes), f"pow2:{min}-{max}")

    @classmethod
    def step(cls, step: int, min: int, max: int) -> BucketPolicy:
        """``min, min+step, …`` up to ``max`` (``max`` always included); raises ``ValueError``."""
        if not isinstance(step, int) or step <= 0:
            raise ValueError(
                f"bucket step must be a positive integer, got {step!r}; e.g. BucketPolicy.step(256, 256, 2048)"
            )
        _check_bounds(min, max)
        n = (max - min) // step + 1 + ((max - min) % step != 0)
        _check_count(n, f"step:{step}:{min}-{max}")
        sizes = list(range(min, max + 1, step))
        if sizes[-1] != max:
            sizes.append(max)
        return cls("step", tuple(sizes), f"step:{step}:{min}-{max}")

    @classmethod
    def explicit(cls, sizes: Any) -> BucketPolicy:
        """Exactly these sizes; empty, unsorted, repeated or non-positive sizes raise ``ValueError`` with the fix."""
        sizes = list(sizes)
        _check_count(len(sizes), "this list")
        if not sizes:
            raise ValueError(
                "bucket list is empty; give at least one size, e.g. BucketPolicy.explicit([128, 512, 2048])"
            )
        if any(not isinstance(s, int) or isinstance(s, bool) or s <= 0 for s in sizes):
            raise ValueError(f"bucket sizes must be positive integers, got {sizes}; drop the non-positive ones")
        if max(sizes) > MAX_BUCKET_SIZE:
            raise ValueError(f"bucket size {max(sizes)} is above the limit of {MAX_BUCKET_SIZE}; use smaller sizes")
        if sizes != sorted(set(sizes)):
            raise ValueError(f"bucket sizes must be strictly increasing, got {sizes}; use {sorted(set(sizes))}")
        return cls("list", tuple(sizes), "list:" + ",".join(str(s) for s in sizes))

    @classmethod
    def parse(cls, spec: str) -> BucketPolicy:
        """Parse a spec string (see the module docs for the forms); raises ``ValueError`` naming the forms."""
        if isinstance(spec, BucketPolicy):
            return spec
        text = str(spec).strip().replace(" ", "")
        if len(text) > 8 * MAX_BUCKETS:
            raise ValueError(f"bucket policy spec of {len(text)} characters is too long; use {_FORMS}")
        m = re.fullmatch(r"pow2:(\d{1,18})-(\d{1,18})", text)
        if m:
            return cls.pow2(int(m.group(1)), int(m.group(2)))
        m = re.fullmatch(r"step:(\d{1,18}):(\d{1,18})-(\d{1,18})", text)
        if m:
            return cls.step(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        m = re.fullmatch(r"list:(-?\d{1,18}(?:,-?\d{1,18})*)", text)
        if m:
            return cls.explicit([int(s) for s in m.group(1).split(",")])
        raise ValueError(f"cannot parse bucket policy {spec!r}; use {_FORMS}")

    def buckets(self) -> list[int]:
        """The bucket sizes, ascending."""
        return list(self.sizes)

    def bucket_for(self, n: int) -> int:
        """Smallest bucket >= ``n``; raises ``ValueError`` when ``n`` exceeds the largest bucket."""
        i = bisect.bisect_left(self.sizes, n)
        if i == len(self.sizes):
            raise ValueError(
                f"length {n} exceeds the largest bucket {self.sizes[-1]} of policy {self.spec}; "
                f"raise its maximum (e.g. {self.kind}:…-{_next_pow2(n)}) or truncate the input"
            )
        return self.sizes[i]

    def __str__(self) -> str:
        return self.spec


def _next_pow2(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def _check_bounds(lo: Any, hi: Any) -> None:
    if not isinstance(lo, int) or not isinstance(hi, int) or lo <= 0 or hi <= 0:
        raise ValueError(f"bucket bounds must be positive integers, got min={lo!r} max={hi!r}; e.g. pow2:128-2048")
    if lo > hi:
        raise ValueError(f"bucket min {lo} is above max {hi}; swap them: {hi}-{lo}")
    if hi > MAX_BUCKET_SIZE:
        raise ValueError(f"bucket max {hi} is above the limit of {MAX_BUCKET_SIZE}; use a smaller maximum")


def _check_count(n: int, spec: str) -> None:
    if n > MAX_BUCKETS:
        raise ValueError(
            f"{spec} makes {n} buckets, above the limit of {MAX_BUCKETS} (each bucket is one compiled graph); "
            "use a larger step, pow2:MIN-MAX, or fewer sizes"
        )


class BucketedCallable:
    """Pads ``dims`` up to the policy's bucket, runs one compiled graph per bucket, slices outputs back."""

    def __init__(self, fn: Any, dims: dict[str, int], policy: BucketPolicy | str, pad_value: float = 0) -> None:
        from .api import _unique, callable_name
        from .backend import neuron_backend, register

        register()
        if not dims:
            raise ValueError("bucketed() needs dims, e.g. dims={'input_ids': 1}")
        self.fn = fn
        self.dims = dict(dims)
        self.pad_value = pad_value
        self.name = _unique(f"{callable_name(fn)}[bucketed]")
        target = fn.forward if isinstance(fn, torch.nn.Module) else fn
        self._sig = inspect.signature(target)
        missing = [d for d in self.dims if d not in self._sig.parameters]
        if missing:
            raise ValueError(
                f"bucketed dims {missing} are not parameters of {callable_name(fn)}: {list(self._sig.parameters)}"
            )
        self._takes_mask = "attention_mask" in self._sig.parameters
        backend = functools.partial(neuron_backend, callable_name=self.name)
        self._compiled = torch.compile(fn, backend=backend, dynamic=False)
        self.last_call: dict[str, Any] | None = None  # argument -> (shape, dtype, device) or value
        # bucket -> the compile records of the graphs compiled for it (frozen at the call that compiled them)
        self.compiled_buckets: dict[int, list[CompileRecord]] = {}
        self.policy = policy  # type: ignore[assignment]

    @property
    def policy(self) -> BucketPolicy:
        """The policy in force (settable with a policy or a spec string)."""
        return self._policy

    @policy.setter
    def policy(self, value: BucketPolicy | str) -> None:
        self._policy = BucketPolicy.parse(value) if isinstance(value, str) else value
        if not isinstance(self._policy, BucketPolicy):
            raise TypeError(f"policy must be a BucketPolicy or a spec string, got {type(value).__name__}")
        shape_log.set_policy(self.name, str(self._policy))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(args, kwargs, observe=True)

    def warmup(self, *args: Any, progress: bool = True, **kwargs: Any) -> Any:
        """Compile every bucket of the policy now; returns a :class:`WarmupSummary`.

        The example arguments (or, without them, zeros shaped like the last call's) are padded or cut
        to each bucket and run once; ``progress`` shows a progress bar. Raises ``ValueError`` when
        there is neither an example nor an earlier call.
        """
        return warmup(self, *args, progress=progress, **kwargs)

    def _call(self, args: tuple[Any, ...], kwargs: dict[str, Any], *, observe: bool) -> Any:
        bound = self._sig.bind_partial(*args, **kwargs)
        values = bound.arguments
        if observe:
            named = [(k, v) for k, v in values.items() if isinstance(v, torch.Tensor)]
            shape_log.observe(self.name, named)
            self.last_call = {
                k: (v.shape, v.dtype, v.device) if isinstance(v, torch.Tensor) else v for k, v in values.items()
            }
        cuts: dict[int, tuple[int, int]] = {}  # dim -> (true length, bucket)
        for arg, dim in self.dims.items():
            x = values.get(arg)
            if not isinstance(x, torch.Tensor):
                continue
            n = x.shape[dim]
            b = self._policy.bucket_for(n)
            if observe:
                shape_log.padded(self.name, b)
            cuts[dim] = (n, b)
            values[arg] = _pad(x, dim % x.dim(), b - n, self.pad_value)
        if self._takes_mask and cuts:
            first = next(iter(self.dims))
            x = bound.arguments[first]
            dim, (n, b) = self.dims[first] % x.dim(), cuts[self.dims[first]]
            mask = values.get("attention_mask")
            if mask is None:
                mask = torch.ones((*x.shape[:dim], n), dtype=torch.int32, device=x.device)
            if mask.shape[-1] == n:
                values["attention_mask"] = _pad(mask, mask.dim() - 1, b - n, 0)
        # one graph per bucket must fit under dynamo's recompile limit (default 8), or later buckets run
        # eagerly; raised only for this call, never process-wide. Twice the buckets plus the default: two
        # bucketed wrappers of one function share dynamo's cache of its code object.
        limit = max(torch._dynamo.config.recompile_limit, 2 * len(self._policy.sizes) + 8)
        records = compile_log.records
        last = records[-1] if records else None
        with torch._dynamo.config.patch(recompile_limit=limit):
            out = self._compiled(*bound.args, **bound.kwargs)
        if cuts and records and records[-1] is not last:
            self._note_compiles(next(iter(cuts.values()))[1], last)
        return _slice(out, cuts)

    def _note_compiles(self, bucket: int, last: LiveRecord | None) -> None:
        """Remember the graphs this call compiled (or loaded) for ``bucket``: the tuner reads their schedules."""
        new = []
        for r in reversed(compile_log.records):
            if r is last:
                break
            if r.model_name == self.name and r.error is None:
                new.append(CompileRecord.from_live(r))
        if new:
            self.compiled_buckets[bucket] = list(reversed(new))


def _pad(x: torch.Tensor, dim: int, extra: int, value: float) -> torch.Tensor:
    if extra <= 0:
        return x
    pad = [0, 0] * (x.dim() - dim - 1) + [0, extra]
    return F.pad(x, pad, value=value)


def _slice(out: Any, cuts: dict[int, tuple[int, int]]) -> Any:
    if isinstance(out, torch.Tensor):
        for dim, (n, b) in cuts.items():
            if n != b and out.dim() > dim and out.shape[dim] == b:
                out = out.narrow(dim, 0, n)
        return out
    if isinstance(out, tuple | list):
        return type(out)(_slice(o, cuts) for o in out)
    if isinstance(out, dict):
        return {k: _slice(v, cuts) for k, v in out.items()}
    return out


def bucketed(
    module_or_fn: Any, dims: dict[str, int] | None = None, policy: BucketPolicy | str = "pow2:128-2048"
) -> BucketedCallable:
    """Wrap ``module_or_fn`` so ``dims`` (argument name -> dimension) are padded to ``policy``'s buckets.

    Raises ``ValueError`` for a bad policy spec, unknown argument names, or (at call time) a length
    above the largest bucket.
    """
    return BucketedCallable(module_or_fn, dims or {"input_ids": 1}, policy)


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
    """Compile every bucket of ``bc``'s policy now (see :meth:`BucketedCallable.warmup`); raises ``ValueError`` without examples."""
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
    cache_bytes = sum(e["bytes"] for e in disk_cache.cache_entries() if e["key"] in keys)
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
