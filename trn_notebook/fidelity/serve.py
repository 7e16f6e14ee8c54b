"""``trn_notebook.serve_estimate()``: modeled serving latency and throughput of a full-size model on Trainium.

Built on the model-level cost model (:mod:`.model`) and the shapes-only full-size walk (:mod:`.walk`,
fake tensors, no weights), composed as the ledger composes its published rows (:mod:`.ledger`):

* each request's prompt is padded to its bucket (:class:`~trn_notebook.compiler.buckets.BucketPolicy`);
  its TTFT is the prefill graph of that bucket (batch 1 under vLLM, the static batch under NxD
  Inference), plus under vLLM at concurrency > 1 half a decode step;
* TPOT is one decode step of the compiled batch reading the KV cache of the mean context, plus under
  vLLM at concurrency c the other c-1 requests' prefills once over the output;
* end to end = TTFT + (output - 1) x TPOT; tokens/s = concurrency x mean output / mean end to end
  (as ``vllm bench serve`` counts it), per chip = / chips (TP logical cores / the chip's cores);
* cold compiles are shown apart: one graph per used prefill bucket plus one decode (token-generation)
  graph per bucket the decode positions reach (NxD Inference's bucket set, as the ledger's compile rows
  count it), each at its modeled Neuron compile time (:mod:`trn_notebook.compiler.compile_time`).

Every figure is modeled; :mod:`.costs` adds time to the first useful result and, only from figures the
user gives, the cost comparison.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import state as _state
from ..compiler.buckets import BucketPolicy
from ..compiler.compile_time import modeled_compile_s
from ..display.format import fmt_duration, fmt_s
from ..display.results import Card, Result, Table
from . import configs, ledger
from .costs import CostInputs, Costs, cost_of
from .fit import ledger_backing
from .model import Budget, Layout, chip_of, graph_instructions
from .walk import OpCount

SOURCE = "modeled (trn_notebook.fidelity: calibrated cost model, docs/fidelity.md 'Model level')"
KNOWN = {s.name.lower(): s for s in (configs.LLAMA_8B, configs.LLAMA_70B, configs.DEEPSEEK_V3, configs.TRINITY_MINI)}
KNOWN |= {s.name.lower(): s for s in configs.QWEN35.values()}


@dataclass(frozen=True)
class Percentiles:
    """p50 / p99 (and the mean) of one figure over the request distribution, seconds."""

    p50: float
    p99: float
    mean: float


@dataclass(repr=False)
class ServeEstimate(Result):
    """A modeled serving estimate (see the module docstring); every figure modeled."""

    model: str
    layout: Layout
    policy: str
    batch: int
    concurrency: int
    requests: int
    chips: int
    ttft: Percentiles
    tpot: Percentiles
    e2e: Percentiles
    tokens_per_s: float
    tokens_per_s_per_chip: float
    padding_share: float  # of the prefill kernels' time, the part spent on padded positions (mean)
    bucket_counts: dict[int, int]
    cold_graphs: int
    cold_compile_s: float  # modeled Neuron compile of the whole bucket set (shown apart, never in p50/p99)
    prefill: dict[int, Budget] = field(default_factory=dict)
    decode: Budget = field(default_factory=Budget)
    costs: Costs | None = None
    notes: list[str] = field(default_factory=list)
    spec_key: str = ""

    @property
    def requests_per_s(self) -> float:
        """Steady-state requests per second at the stated concurrency."""
        return self.concurrency / self.e2e.mean if self.e2e.mean > 0 else 0.0

    def line(self) -> str:
        """The estimate in one sentence (the migration report shows it)."""
        lay = self.layout
        text = (
            f"serve estimate (modeled) of {self.model} on {lay.chip} TP{lay.tp} {lay.stack}, {self.policy}, batch "
            f"{self.batch}, concurrency {self.concurrency}: TTFT p50 {fmt_s(self.ttft.p50)} / p99 {fmt_s(self.ttft.p99)}, "
            f"TPOT p50 {fmt_s(self.tpot.p50)}, {self.tokens_per_s:.1f} tok/s ({self.tokens_per_s_per_chip:.1f} per chip); "
            f"{self.cold_graphs} cold compiles, modeled Neuron compile {fmt_duration(self.cold_compile_s)}"
        )
        return f"{text}; {self.backing()}"

    def backing(self) -> str:
        """Which ledger rows (docs/fidelity.md, "Model level") back this estimate's figures."""
        same = [r for r in ledger.ROWS if r.scenario.spec.key == self.spec_key and r.scenario.layout == self.layout]
        if same:
            ratios = ", ".join(f"{r.id} {r.metric} {ledger.evaluate(r).ratio:.2f}" for r in same)
            return f"backed by ledger rows of the same model and layout (modeled / published: {ratios})"
        return ledger_backing()

    def parts(self) -> list[Result]:
        lay = self.layout
        head = Card(
            f"Serving estimate (modeled): {self.model} on {lay.chip} TP{lay.tp} ({self.chips} chips), {lay.stack}",
            [
                ("buckets", f"{self.policy}; requests per bucket {self.bucket_counts}"),
                ("batch / concurrency", f"{self.batch} / {self.concurrency} ({self.requests} requests)"),
                ("TTFT p50 / p99", f"{fmt_s(self.ttft.p50)} / {fmt_s(self.ttft.p99)}"),
                ("TPOT p50 / p99", f"{fmt_s(self.tpot.p50)} / {fmt_s(self.tpot.p99)}"),
                ("end to end p50 / p99", f"{fmt_s(self.e2e.p50)} / {fmt_s(self.e2e.p99)}"),
                ("tokens/s", f"{self.tokens_per_s:.1f} total, {self.tokens_per_s_per_chip:.1f} per chip"),
                ("padding", f"{100 * self.padding_share:.1f}% of prefill kernel time on padded positions"),
                (
                    "cold compiles (apart)",
                    f"{self.cold_graphs} graphs, modeled Neuron compile {fmt_duration(self.cold_compile_s)}",
                ),
            ],
            [SOURCE, self.backing(), *self.notes],
        )
        rows = [[f"prefill {b}", *_ms(bud), bud.kernels] for b, bud in sorted(self.prefill.items())] + [
            ["decode step", *_ms(self.decode), self.decode.kernels]
        ]
        budget = Table(
            "Modeled time budget per graph (ms)",
            ["graph", "compute", "weight/KV reads", "collectives", "host", "launch", "padding", "total", "kernels"],
            rows,
        )
        out: list[Result] = [head, budget]
        if self.costs is not None:
            out.append(self.costs.card())
        return out


def _ms(b: Budget) -> list[str]:
    parts = (b.compute_s, b.reads_s, b.collectives_s, b.host_s, b.launch_s, b.padding_s, b.total_s)
    return [f"{v * 1e3:.2f}" for v in parts]


def _spec_of(model_or_config: Any) -> configs.ModelSpec:
    """A :class:`~.configs.ModelSpec` from a spec, a known name, a ``transformers`` config or model."""
    if isinstance(model_or_config, configs.ModelSpec):
        return model_or_config
    if isinstance(model_or_config, str):
        spec = KNOWN.get(model_or_config.strip().lower())
        if spec is None:
            raise ValueError(
                f"unknown model name {model_or_config!r}; known: {', '.join(sorted(KNOWN))}; "
                "or pass a transformers config (e.g. AutoConfig.from_pretrained(...))"
            )
        return spec
    cfg = getattr(model_or_config, "config", model_or_config)
    if not hasattr(cfg, "to_dict") or not hasattr(cfg, "model_type"):
        raise TypeError(
            f"serve_estimate needs a transformers causal-LM config or model, a ModelSpec or a known name, "
            f"not {type(model_or_config).__name__}"
        )
    return configs.ModelSpec.from_config(cfg)


def _distribution(values: Any, name: str) -> np.ndarray:
    """Lengths as an int array: an int, a sequence / array / Series, or ``{length: count}``."""
    arr: np.ndarray
    if isinstance(values, dict):
        arr = np.repeat(np.asarray(list(values), dtype=np.int64), np.asarray(list(values.values()), dtype=np.int64))
    else:
        arr = np.atleast_1d(np.asarray(values, dtype=np.int64))
    if arr.size == 0 or arr.min() < 1:
        raise ValueError(f"{name} must be positive token counts (an int, a sequence or {{length: count}})")
    return arr


def _layout(layout: Any, chip: str, stack: str, sampling: str) -> Layout:
    if isinstance(layout, Layout):
        return layout
    tp = layout[0] if isinstance(layout, tuple | list) else layout
    if not isinstance(tp, int) or tp < 1:
        raise ValueError(f"layout must be a TP degree, (tp,) or a Layout, got {layout!r}")
    return Layout(chip, tp, stack, sampling)


def _policy(buckets: Any, prompts: np.ndarray) -> BucketPolicy:
    if buckets is None:  # NxD Inference's default: powers of two from 128 up to the longest prompt
        return BucketPolicy.pow2(min(128, int(prompts.max())), max(128, int(prompts.max())))
    if isinstance(buckets, BucketPolicy):
        return buckets
    if isinstance(buckets, str):
        return BucketPolicy.parse(buckets)
    return BucketPolicy.explicit(list(buckets))


def _decode_buckets(pol: BucketPolicy, prompts: np.ndarray, outputs: np.ndarray) -> tuple[list[int], int]:
    """The buckets a request's decode positions (prompt .. prompt + output - 1) pass through, over all
    requests, and how many requests run past the largest bucket (counted in the largest bucket's graph)."""
    largest = pol.sizes[-1]
    reached: set[int] = set()
    beyond = 0
    for p, o in zip(prompts.tolist(), outputs.tolist()):
        last = int(p) + max(int(o), 1) - 1
        if last > largest:
            beyond += 1
        lo, hi = pol.bucket_for(int(p)), pol.bucket_for(min(last, largest))
        reached.update(b for b in pol.sizes if lo <= b <= hi)
    return sorted(reached), beyond


def _instructions(ops: list[OpCount], tp: int, hidden: int) -> float:
    return graph_instructions(ops, tp, hidden)


def _pct(values: np.ndarray) -> Percentiles:
    return Percentiles(float(np.percentile(values, 50)), float(np.percentile(values, 99)), float(values.mean()))


def serve_estimate(
    model_or_config: Any,
    prompt_len: Any = 512,
    output_len: Any = 128,
    *,
    batch: int = 1,
    concurrency: int = 1,
    buckets: BucketPolicy | list[int] | str | None = None,
    layout: Layout | tuple[int, ...] | int = (8,),
    chip: str = "trn2",
    stack: str = "nxdi",
    sampling: str = "device",
    decode_context: int | None = None,
    load_s: float | None = None,
    price_per_hour: float | None = None,
    engineering_days: float | None = None,
    day_rate: float | None = None,
    accepted_fraction: float | None = None,
    baseline: dict[str, Any] | None = None,
) -> ServeEstimate:
    """Modeled TTFT, TPOT, end-to-end p50/p99 and tokens/s of serving ``model_or_config`` (a
    ``transformers`` config or model, a ``fidelity.configs.ModelSpec`` or a known name such as
    ``"Llama-3.1-8B"``) at full size; see the module docstring for the composition.

    ``prompt_len`` / ``output_len``: ints or distributions (sequences, arrays, ``{length: count}``; an
    output distribution pairs with the prompts). ``buckets``: a ``BucketPolicy``, a list of sizes or a
    policy string (default: powers of two from 128, NxD Inference's default). ``layout``: the TP degree,
    ``(tp,)`` or a ``fidelity.Layout``. The cost inputs (``load_s``, ``price_per_hour``,
    ``engineering_days``, ``day_rate``, ``accepted_fraction``, ``baseline``) feed :mod:`.costs`; none
    has a built-in value. Walks each used bucket's graphs shapes-only (seconds per bucket).

    Raises ``ValueError`` for non-positive lengths, a prompt above the largest bucket, concurrency above
    the compiled batch, or a bad layout; ``TypeError`` for an object that is not a config or model.
    """
    spec = _spec_of(model_or_config)
    lay = _layout(layout, chip, stack, sampling)
    chip_spec = chip_of(lay.chip)
    prompts = _distribution(prompt_len, "prompt_len")
    outputs = _distribution(output_len, "output_len")
    if outputs.size == 1:
        outputs = np.full(prompts.size, int(outputs[0]))
    elif prompts.size == 1:
        prompts = np.full(outputs.size, int(prompts[0]))
    if outputs.size != prompts.size:
        raise ValueError(f"output_len has {outputs.size} values for {prompts.size} prompts; give one or as many")
    if batch < 1 or concurrency < 1:
        raise ValueError(f"batch and concurrency must be >= 1 (got {batch}, {concurrency})")
    if concurrency > batch:
        raise ValueError(
            f"concurrency {concurrency} exceeds the compiled batch {batch}: the extra requests would queue, "
            "which this estimate does not model; set batch >= concurrency"
        )
    pol = _policy(buckets, prompts)
    per_request: np.ndarray = np.asarray([pol.bucket_for(int(p)) for p in prompts], dtype=np.int64)
    used = sorted({int(b) for b in per_request})
    out_mean = round(float(outputs.mean()))
    context = decode_context or int(prompts.mean()) + out_mean // 2
    scen = {
        b: ledger.Scenario(spec, lay, b, b, out_mean, batch=batch, concurrency=concurrency, decode_context=context)
        for b in used
    }
    prefill = {b: ledger.prefill_budget(s) for b, s in scen.items()}
    decode = ledger.decode_budget(scen[used[-1]])
    vllm_c = lay.stack == "vllm" and concurrency > 1
    pre_s = np.asarray([prefill[int(b)].total_s for b in per_request])
    ttft = pre_s + (0.5 * decode.total_s if vllm_c else 0.0)
    stall = pre_s.mean() * (concurrency - 1) / np.maximum(outputs - 1, 1) if vllm_c else np.zeros(prompts.size)
    tpot = decode.total_s + stall
    e2e = ttft + (outputs - 1) * tpot
    kernels_s = np.asarray([prefill[int(b)].compute_s + prefill[int(b)].reads_s for b in per_request])
    padded = (1.0 - prompts / per_request) * kernels_s
    chips = max(1, math.ceil(lay.tp / chip_spec.logical_cores))
    tok_s = concurrency * float(outputs.mean()) / float(e2e.mean())
    walks = {b: ledger.walk_scenario(s) for b, s in scen.items()}
    instructions = sum(_instructions(w["prefill"], lay.tp, spec.hidden) for w in walks.values())
    decode_buckets, beyond = _decode_buckets(pol, prompts, outputs)
    for b in decode_buckets:  # one token-generation graph per bucket its KV positions reach, as the ledger's rows
        s = ledger.Scenario(spec, lay, b, b, out_mean, batch=batch, concurrency=concurrency, decode_context=b)
        instructions += _instructions(ledger.walk_scenario(s, ("decode",))["decode"], lay.tp, spec.hidden)
    notes = [
        f"decode reads the KV cache of {context} positions (mean prompt + half the mean output)",
        f"cold compiles: one graph per used prefill bucket ({len(used)}) + one decode graph per bucket the "
        f"decode positions reach ({len(decode_buckets)}), modeled Neuron compile (compiler/compile_time.py); "
        "not in the latencies above",
    ]
    if beyond:
        notes.append(
            f"{beyond} request(s) decode past the largest bucket ({pol.sizes[-1]}): counted in its graph here; "
            "NxD Inference needs a sequence length of at least prompt + output"
        )
    if spec.approximation:
        notes.append(f"model dimensions: {spec.approximation}")
    est = ServeEstimate(
        model=spec.name,
        layout=lay,
        policy=str(pol),
        batch=batch,
        concurrency=concurrency,
        requests=int(prompts.size),
        chips=chips,
        ttft=_pct(ttft),
        tpot=_pct(np.broadcast_to(tpot, prompts.shape).astype(float)),
        e2e=_pct(e2e),
        tokens_per_s=tok_s,
        tokens_per_s_per_chip=tok_s / chips,
        padding_share=float(padded.sum() / kernels_s.sum()) if kernels_s.sum() else 0.0,
        bucket_counts={b: int((per_request == b).sum()) for b in used},
        cold_graphs=len(used) + len(decode_buckets),
        cold_compile_s=modeled_compile_s(instructions, len(used) + len(decode_buckets)),
        prefill=prefill,
        decode=decode,
        notes=notes,
        spec_key=spec.key,
    )
    inputs = CostInputs(load_s, price_per_hour, engineering_days, day_rate, accepted_fraction, baseline)
    est.costs = cost_of(
        inputs,
        requests_per_s=est.requests_per_s,
        cold_compile_s=est.cold_compile_s,
        first_request_s=est.e2e.p50,
        weight_bytes=ledger.PARAM_BYTES[spec.key],
    )
    _last[:] = [est]
    return est


_last: list[ServeEstimate] = []  # the session's latest estimate (the migration report shows it)
_state.register("serve_estimate", _state.Globals(__name__, "_last"), reset=True)


def last_estimate() -> ServeEstimate | None:
    """The latest ``serve_estimate()`` of this session (None before one, or after ``reset()``)."""
    return _last[-1] if _last else None
