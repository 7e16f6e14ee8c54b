"""The model-level ledger: each published Trainium figure beside the cost model's figure.

Rows are the published figures of ``shared/reference/trn2-model-figures.md`` (ids R1 … R17) with
their configurations. Each row's model is walked shapes-only (``walk.walk``: fake tensors, no
weights) at full size, and the step budgets of :mod:`.model` compose its TTFT / TPOT.

Serving composition (structural, no constants of its own):

* TTFT = one prefill graph at the padded bucket (batch 1 under vLLM, whose scheduler prefills one
  request per step; the static batch under NxD Inference), plus under vLLM at concurrency > 1 half
  a decode step on average (the prefill waits for the in-flight decode step of the other requests);
* TPOT = one decode step at the compiled batch, reading the KV cache of the mean context; under vLLM
  at concurrency c each request's decode also stalls for the other c-1 requests' prefills once
  over its output (amortised per token);
* tok/s (R1) = concurrency x output / (TTFT + (output-1) x TPOT), as ``vllm bench serve`` counts it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from . import loops, moe
from .configs import DEEPSEEK_V3, LLAMA_8B, LLAMA_70B, QWEN35, TRINITY_MINI, ModelSpec
from .model import Budget, Layout, step_budget
from .walk import Counter, OpCount, walk


@dataclass(frozen=True)
class Scenario:
    """One serving configuration of a published row."""

    spec: ModelSpec
    layout: Layout
    prompt: int  # real prompt tokens
    bucket: int  # the prefill bucket the prompt is padded to
    output: int  # generated tokens
    batch: int = 1  # compiled (static) decode batch
    concurrency: int = 1
    decode_context: int = 0  # KV positions a decode step reads (0: prompt + output / 2)

    @property
    def context(self) -> int:
        """KV positions the mean decode step attends to."""
        return self.decode_context or self.prompt + self.output // 2


@dataclass(frozen=True)
class Row:
    """One published figure: id, what is measured, the published value (seconds or tok/s)."""

    id: str
    metric: str  # "TTFT", "TPOT", "tok/s", "ITL"
    scenario: Scenario
    published: float
    source: str
    note: str = ""


@dataclass
class Result:
    """A row's modeled figure and budget."""

    row: Row
    modeled: float
    budget: Budget
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        """Modeled / published (for tok/s: published / modeled, so > 1 is always 'modeled too slow')."""
        if self.row.metric == "tok/s":
            return self.row.published / self.modeled
        return self.modeled / self.row.published


def _experts_used(experts: int, rows: int) -> float:
    """Expected distinct experts hit by ``rows`` routed rows (uniform routing)."""
    return experts * (1.0 - (1.0 - 1.0 / experts) ** rows)


# memo of walked graphs, one entry per phase: ("prefill", config key, bucket, batch) and ("decode", config
# key, batch, KV positions), so scenarios sharing a graph (R13's prefills and Trinity's compile rows, the
# R11 rows and the Qwen3.5 compile rows) walk it once in a run
_WALKS: dict[tuple[Any, ...], list[OpCount]] = {}
PARAM_BYTES: dict[str, int] = {}  # ModelSpec.key -> BF16 parameter bytes (counted by the walks)
PHASES = ("prefill", "decode")


def _phase_keys(s: Scenario) -> dict[str, tuple[Any, ...]]:
    prefill_batch = 1 if s.layout.stack == "vllm" else s.batch
    return {
        "prefill": ("prefill", s.spec.key, s.bucket, prefill_batch),
        "decode": ("decode", s.spec.key, s.batch, s.context),
    }


def walk_scenario(s: Scenario, phases: tuple[str, ...] = PHASES) -> dict[str, list[OpCount]]:
    """The prefill and decode ops of a scenario's model (each graph walked once per process: a graph
    another scenario already walked, same config, shape and KV positions, is reused). ``phases`` limits
    the result, and the walk, to those phases (a decode-only graph walks no prefill)."""
    keys = _phase_keys(s)
    missing = {phase for phase in phases if keys[phase] not in _WALKS}
    if missing:
        _walk_phases(s, missing, keys)
    return {phase: _WALKS[keys[phase]] for phase in phases}


def _walk_phases(s: Scenario, phases: set[str], keys: dict[str, tuple[Any, ...]]) -> None:
    """Walk the scenario's ``phases`` (``prefill``, ``decode``) in one model build and memoise them."""
    prefill_batch = keys["prefill"][3]
    cfg = s.spec.config()
    cfg._attn_implementation = "sdpa"
    if s.spec.is_moe:
        cfg._experts_implementation = "grouped_mm"

    def build() -> torch.nn.Module:
        from transformers import AutoModelForCausalLM

        return AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)

    def run(model: torch.nn.Module, count: Counter) -> None:
        with loops.patched(model):  # a linear-attention chunk scan walked once and repeated (identical ops)
            if "prefill" in phases:
                ids = torch.zeros(prefill_batch, s.bucket, dtype=torch.long)
                with count("prefill"):
                    model(input_ids=ids, use_cache=False, logits_to_keep=1)
            if "decode" in phases:
                name, cache = decode_cache(model, s.batch, s.context)
                with count("decode"):
                    model(input_ids=torch.zeros(s.batch, 1, dtype=torch.long), **{name: cache})

    info: dict[str, Any] = {}
    walked = walk(build, run, experts_used=_experts_used, info=info, replicated=s.spec.is_replicated)
    # MoE layers as NxD Inference runs them (context encoding vs token generation paths, fidelity.moe)
    for phase, ops in walked.items():
        _WALKS[keys[phase]] = [moe.dispatch(op, prefill=phase == "prefill") for op in ops]
    PARAM_BYTES[s.spec.key] = int(info["param_bytes"])


SHORT_CONTEXT = 128  # positions of the prefill that builds a decode walk's KV cache before it is lengthened


def decode_cache(model: torch.nn.Module, batch: int, context: int, *, short: int = SHORT_CONTEXT) -> tuple[str, Any]:
    """``(keyword, cache)`` holding ``context`` KV positions per sequence for a decode walk, on fake tensors.

    The decode step's ops depend only on the cache's shapes, so when every layer of the cache is a plain
    ``DynamicLayer`` (K/V grow with the context) or a ``LinearAttentionLayer`` (fixed-size conv and
    recurrent states), a prefill of ``short`` positions builds it and each K/V is replaced by an empty
    fake tensor of ``context`` positions: the same cache a ``context``-long prefill builds, at a fraction
    of the walk (Qwen3.5's linear attention loops over 64-token chunks, so its prefill walk grows with the
    context). Any other cache (sliding-window layers, which also count the positions seen) is built by
    the full prefill. ``tests/fidelity/test_walk_cache.py`` checks the decode walks are identical."""
    from transformers import cache_utils

    plain = tuple(getattr(cache_utils, n) for n in ("DynamicLayer", "LinearAttentionLayer") if hasattr(cache_utils, n))
    n = min(short, context)
    past = model(input_ids=torch.zeros(batch, n, dtype=torch.long), use_cache=True, logits_to_keep=1)
    # transformers >= 5.2x names the KV cache ``cache`` (``past_key_values`` warns); older 5.x the old name
    name = "cache" if "cache" in past else "past_key_values"
    cache = past[name]
    layers = getattr(cache, "layers", None)
    if n == context:
        return name, cache
    if not plain or layers is None or any(type(layer) not in plain for layer in layers):
        past = model(input_ids=torch.zeros(batch, context, dtype=torch.long), use_cache=True, logits_to_keep=1)
        return name, past[name]
    dynamic = plain[0]
    for layer in layers:
        if type(layer) is dynamic and getattr(layer, "keys", None) is not None:
            shape = (*layer.keys.shape[:-2], context, layer.keys.shape[-1])
            layer.keys = layer.keys.new_empty(shape)
            layer.values = layer.values.new_empty((*layer.values.shape[:-2], context, layer.values.shape[-1]))
    return name, cache


def prefill_budget(s: Scenario) -> Budget:
    """Modeled budget of the scenario's prefill graph."""
    ops = walk_scenario(s)["prefill"]
    batch = 1 if s.layout.stack == "vllm" else s.batch
    return step_budget(
        ops, s.layout, layers=s.spec.layers, hidden=s.spec.hidden, kv_heads=s.spec.kv_heads, tokens=s.bucket,
        vocab=int(s.spec.params.get("vocab_size", 0)), batch=batch, real_fraction=s.prompt / s.bucket,
    )  # fmt: skip


def decode_budget(s: Scenario) -> Budget:
    """Modeled budget of one decode step of the scenario."""
    ops = walk_scenario(s)["decode"]
    return step_budget(
        ops, s.layout, layers=s.spec.layers, hidden=s.spec.hidden, kv_heads=s.spec.kv_heads, tokens=1,
        vocab=int(s.spec.params.get("vocab_size", 0)), batch=s.batch,
    )  # fmt: skip


def evaluate(row: Row) -> Result:
    """Model one row (walks its model if this process has not yet)."""
    s = row.scenario
    pre = prefill_budget(s)
    dec = decode_budget(s)
    vllm_c = s.layout.stack == "vllm" and s.concurrency > 1
    ttft = pre.plus(dec.scaled(0.5)) if vllm_c else pre
    tpot = dec.plus(pre.scaled((s.concurrency - 1) / max(s.output - 1, 1))) if vllm_c else dec
    if row.metric == "TTFT":
        return Result(row, ttft.total_s, ttft)
    if row.metric in ("TPOT", "ITL"):
        return Result(row, tpot.total_s, tpot)
    if row.metric == "tok/s":
        seconds = ttft.total_s + (s.output - 1) * tpot.total_s
        return Result(row, s.concurrency * s.output / seconds, tpot)
    raise ValueError(f"unknown metric {row.metric!r}")


SDK = "aws-neuron-sdk"
NXDI = "neuronx-distributed-inference"
_R1 = Scenario(LLAMA_8B, Layout("trn2", 8, "vllm"), 512, 512, 128, batch=2, concurrency=2)
_R3 = Scenario(LLAMA_70B, Layout("trn2", 64, "vllm"), 10_000, 12_288, 1_500)
_R6 = Scenario(DEEPSEEK_V3, Layout("trn2", 64), 256, 256, 256)
_R11 = {k: Scenario(QWEN35[k], Layout("trn2", 8), 16, 512, 64, decode_context=512) for k in QWEN35}
_R12 = Scenario(QWEN35["2B"], Layout("trn2", 4), 16, 1024, 64, decode_context=1024)
_R13 = {b: Scenario(TRINITY_MINI, Layout("trn2", 4), 2048, 2048, 128, batch=b) for b in (1, 2, 4)}
_R17 = {
    p: Scenario(LLAMA_8B, Layout("inf2", 8, "vllm", p), 2048, 2048, 128, batch=32, decode_context=2048)
    for p in ("device", "host")
}
_R11_TPOT = {"2B": 4.00, "4B": 5.68, "9B": 6.89, "27B": 21.58, "35B-A3B": 7.72}
_R11_TTFT = {"2B": 17.6, "4B": 34.6, "9B": 42.9, "27B": 118.6, "35B-A3B": 480.0}
_R13_TTFT = {1: 371.0, 2: 598.0, 4: 805.0}
_R13_STEP = {1: 11.8, 2: 11.5, 4: 13.6}
_QSRC = f"{NXDI} contrib/models/Qwen3.5-35B-A3B/README.md, contrib/models/Qwen3.5-2B/README.md"

ROWS: tuple[Row, ...] = (
    Row("R1", "TTFT", _R1, 51.07e-3, f"{SDK} vllm-neuron tutorial-eagle3-speculative-decoding-llama-3-1.md"),
    Row("R1", "TPOT", _R1, 10.52e-3, f"{SDK} vllm-neuron tutorial-eagle3-speculative-decoding-llama-3-1.md"),
    Row("R1", "tok/s", _R1, 184.44, f"{SDK} vllm-neuron tutorial-eagle3-speculative-decoding-llama-3-1.md"),
    Row("R3", "TTFT", _R3, 814.2e-3, f"{SDK} libraries/nxd-inference/tutorials/trn2-llama3.3-70b-tutorial.rst"),
    Row("R3", "TPOT", _R3, 19.6e-3, f"{SDK} libraries/nxd-inference/tutorials/trn2-llama3.3-70b-tutorial.rst"),
    Row("R6", "TPOT", _R6, 20.5e-3, f"{NXDI} contrib/models/DeepSeek-V3/README.md"),
    Row("R6", "TTFT", _R6, 1667e-3, f"{NXDI} contrib/models/DeepSeek-V3/README.md"),
    *(Row("R11", "TPOT", _R11[k], v * 1e-3, _QSRC, f"Qwen3.5-{k}") for k, v in _R11_TPOT.items()),
    *(Row("R11", "TTFT", _R11[k], v * 1e-3, _QSRC, f"Qwen3.5-{k}") for k, v in _R11_TTFT.items()),
    Row("R12", "TTFT", _R12, 42.2e-3, f"{NXDI} contrib/models/Qwen3.5-2B/README.md"),
    Row("R12", "TPOT", _R12, 4.75e-3, f"{NXDI} contrib/models/Qwen3.5-2B/README.md"),
    *(Row("R13", "TTFT", _R13[b], v * 1e-3, f"{NXDI} contrib/models/Trinity/README.md", f"batch {b}") for b, v in _R13_TTFT.items()),
    *(Row("R13", "TPOT", _R13[b], v * 1e-3, f"{NXDI} contrib/models/Trinity/README.md", f"batch {b}") for b, v in _R13_STEP.items()),
    Row("R17", "ITL", _R17["device"], 24.5e-3, "optimum-neuron benchmark/vllm/chunked-prefill/README.md", "sampling on device"),
    Row("R17", "ITL", _R17["host"], 48.2e-3, "optimum-neuron benchmark/vllm/chunked-prefill/README.md", "sampling on the host"),
)  # fmt: skip


def evaluate_all(rows: tuple[Row, ...] = ROWS, progress: Callable[[str], None] | None = None) -> list[Result]:
    """Model every row; ``progress`` is called with each row's label before it is modeled."""
    out = []
    for row in rows:
        if progress:
            progress(f"{row.id} {row.metric} {row.note}")
        out.append(evaluate(row))
    return out
