"""Static-shape generation: compiled decoding with a static cache builds a bounded number of graphs,
reports them (compile log, ``%trn shapes``' shape log) and hits the cache when run again."""

from __future__ import annotations

import copy

import pytest
import torch

pytest.importorskip("transformers")

from transformers import CompileConfig

from trn_notebook.compiler import compile_log, shape_log
from trn_notebook.zoo.specs import build, spec

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("fresh_compiler")]


def _generate(model, ids, new_tokens, **kwargs):
    with torch.no_grad():
        out = model.generate(input_ids=ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                             **kwargs)  # fmt: skip
    return out.cpu()


def test_static_cache_decoding_is_one_graph_reported_and_cached():
    cpu = build(spec("llama"))
    cpu.generation_config.pad_token_id = 0
    dev = copy.deepcopy(cpu).to("neuron")
    static = {
        "cache_implementation": "static",
        "max_cache_len": 32,  # one cache shape for every prompt and length up to 32: one decode graph
        "compile_config": CompileConfig(backend="neuron", mode=None, fullgraph=False),
    }
    g = torch.Generator().manual_seed(5)
    prompts = [torch.randint(3, 90, (1, n), generator=g) for n in (5, 9, 5)]
    for ids, new in zip(prompts, (4, 6, 3), strict=True):
        got = _generate(dev, ids.to("neuron"), new, **static)
        assert torch.equal(got, _generate(cpu, ids, new)), "compiled static-cache tokens differ from CPU eager"
    records = compile_log.snapshot()
    assert len(records) == 1, [r.graph_name for r in records]  # the decode step; prefill runs eagerly
    (rec,) = records
    assert rec.model_name == "LlamaForCausalLM" and rec.cache_result == "miss"
    assert rec.runs == (4 - 1) + (6 - 1) + (3 - 1)  # one launch per decoded token after the first
    shapes = shape_log.snapshot()["LlamaForCausalLM"]
    assert len(shapes.signatures) == 1 and sum(shapes.signatures.values()) == 1

    torch._dynamo.reset()  # a re-run (the cell again, a fresh model copy, dynamo restarted) hits the compile cache
    dev2 = copy.deepcopy(cpu).to("neuron")
    _generate(dev2, prompts[0].to("neuron"), 4, **static)
    again = compile_log.snapshot()[1:]
    assert [r.cache_result for r in again] == ["memory hit"], [r.graph_id for r in again]

    from trn_notebook.compiler import backend

    torch._dynamo.reset()
    backend.clear_memory_cache()  # a new kernel: only the disk cache is left, and it is reused
    dev3 = copy.deepcopy(cpu).to("neuron")
    got = _generate(dev3, prompts[1].to("neuron"), 6, **static)
    assert torch.equal(got, _generate(cpu, prompts[1], 6))
    assert compile_log.snapshot()[-1].cache_result == "disk hit", compile_log.snapshot()[-1]
