"""The decode walk's cheap cache (ledger.decode_cache) records exactly the ops of a cache built by a full
prefill, so the ledger's figures do not depend on how the cache was built."""

from __future__ import annotations

import contextlib
import dataclasses
import warnings

import pytest
import torch

from trn_notebook.fidelity import ledger, loops
from trn_notebook.fidelity.configs import LLAMA_8B, QWEN35, TRINITY_MINI, ModelSpec
from trn_notebook.fidelity.walk import Counter, OpCount, walk


def _decode_ops(spec: ModelSpec, batch: int, context: int, *, full: bool) -> list[OpCount]:
    cfg = spec.config()
    cfg._attn_implementation = "sdpa"
    if spec.is_moe:
        cfg._experts_implementation = "grouped_mm"

    def build() -> torch.nn.Module:
        from transformers import AutoModelForCausalLM

        return AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)

    def run(model: torch.nn.Module, count: Counter) -> None:
        if full:
            past = model(input_ids=torch.zeros(batch, context, dtype=torch.long), use_cache=True, logits_to_keep=1)
            name = "cache" if "cache" in past else "past_key_values"
            cache = past[name]
        else:
            name, cache = ledger.decode_cache(model, batch, context)
        with count("decode"):
            model(input_ids=torch.zeros(batch, 1, dtype=torch.long), **{name: cache})

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return walk(build, run)["decode"]


def _small(spec: ModelSpec, layers: int) -> ModelSpec:
    params = spec.params | {"num_hidden_layers": layers}
    if "layer_types" in params:
        params["layer_types"] = params["layer_types"][:layers]
    return dataclasses.replace(spec, params=params)


@pytest.mark.parametrize(
    ("spec", "batch", "context"),
    [
        (_small(QWEN35["2B"], 4), 1, 512),  # three linear-attention layers and one full-attention layer
        (_small(QWEN35["35B-A3B"], 4), 1, 1024),  # the MoE sibling (the compile rows' buckets)
        (_small(LLAMA_8B, 2), 2, 576),  # R1's decode: batch 2
        (_small(TRINITY_MINI, 4), 1, 300),  # sliding-window layers: built by the full prefill
    ],
    ids=["qwen3.5-2b", "qwen3.5-35b-a3b", "llama-8b", "trinity"],
)
def test_the_cheap_decode_cache_records_the_ops_of_a_full_prefill_cache(spec, batch, context):
    cheap = _decode_ops(spec, batch, context, full=False)
    full = _decode_ops(spec, batch, context, full=True)
    assert cheap and cheap == full
    assert _decode_ops(spec, batch, context // 2, full=False) != full  # the comparison sees the context


def _prefill_ops(spec: ModelSpec, tokens: int, *, scan_once: bool) -> list[OpCount]:
    cfg = spec.config()
    cfg._attn_implementation = "sdpa"
    if spec.is_moe:
        cfg._experts_implementation = "grouped_mm"

    def build() -> torch.nn.Module:
        from transformers import AutoModelForCausalLM

        return AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)

    def run(model: torch.nn.Module, count: Counter) -> None:
        with loops.patched(model) if scan_once else contextlib.nullcontext(False) as swapped:
            assert swapped == scan_once
            with count("prefill"):
                model(input_ids=torch.zeros(1, tokens, dtype=torch.long), use_cache=False, logits_to_keep=1)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return walk(build, run)["prefill"]


@pytest.mark.parametrize("spec", [_small(QWEN35["2B"], 4), _small(QWEN35["35B-A3B"], 4)], ids=["2b", "35b-a3b"])
def test_walking_the_chunk_scan_once_records_the_ops_of_every_chunk(spec):
    once = _prefill_ops(spec, 512, scan_once=True)
    every = _prefill_ops(spec, 512, scan_once=False)
    assert len(every) > len(_prefill_ops(spec, 256, scan_once=False))  # the scan grows with the tokens
    assert once == every
