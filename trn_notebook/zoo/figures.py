"""Benchmark figures of one zoo model (``--bench`` workers only): cold compile vs ``aot_eager``, decode per token.

* cold compile: first compiled forward call minus a warm call, with an empty compile cache and
  ``torch._dynamo.reset()``, for ``backend="neuron"`` and for ``backend="aot_eager"``, both on a
  neuron copy of the model (same dynamo capture and AOT tracing, no lowering): the ratio is what
  the neuron compiler adds.
* decode per token: greedy generation with a static cache compiled for neuron vs CPU eager
  generation (dynamic cache), both warm; per-token time is the slope between 4 and 12 new tokens
  (prefill cancels). Wall clock, plus the simulator's modeled device time per token.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import torch

from .specs import make_inputs, prompt

_perf = time.perf_counter


def _cold_compile_s(model: torch.nn.Module, backend: str, inputs: dict[str, torch.Tensor]) -> float:
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=backend)
    with torch.no_grad():
        t0 = _perf()
        compiled(**inputs)
        cold = _perf() - t0
        t0 = _perf()
        compiled(**inputs)
        warm = _perf() - t0
    return max(cold - warm, 1e-9)


def _per_token(run: Any) -> float:
    run(2)  # warm: compiles and caches what generation needs
    t0 = _perf()
    run(4)
    short = _perf() - t0
    t0 = _perf()
    run(12)
    return max((_perf() - t0 - short) / 8, 1e-9)


def measure(runner: Any) -> dict[str, float]:
    """Figures for ``runner`` (a :class:`~trn_notebook.zoo.stages.Runner`); missing ones are left out."""
    from transformers import CompileConfig

    from trn_notebook.device import clocks

    spec, cpu = runner.spec, runner.cpu
    figures: dict[str, float] = {}
    inputs = make_inputs(spec, cpu, labels=False)
    try:
        dev = runner.device_model().eval()
        neuron_s = _cold_compile_s(dev, "neuron", {k: v.to("neuron") for k, v in inputs.items()})
        aot_s = _cold_compile_s(
            runner.device_model().eval(), "aot_eager", {k: v.to("neuron") for k, v in inputs.items()}
        )
        figures |= {"cold_compile_s": neuron_s, "aot_eager_compile_s": aot_s, "cold_compile_ratio": neuron_s / aot_s}
    except Exception as exc:
        runner.notes.append(f"cold compile not measured: {type(exc).__name__}: {exc}"[:300])
    if not spec.generates or runner.stages_status.get("generate_compiled") != "pass":
        return figures
    torch._dynamo.reset()
    dev = runner.device_model().eval()
    cpu_model = copy.deepcopy(cpu).eval()
    p_cpu = prompt(spec, cpu)
    p_dev = {k: v.to("neuron") for k, v in p_cpu.items()}
    cc = CompileConfig(backend="neuron", mode=None, fullgraph=False)  # type: ignore[arg-type]
    cache_len = 64  # one static cache shape: every call below reuses one decode graph
    for m in (dev, cpu_model):
        if m.generation_config.pad_token_id is None:
            m.generation_config.pad_token_id = 0

    def gen_dev(n: int) -> None:
        with torch.no_grad():
            out = dev.generate(**p_dev, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                               cache_implementation="static", max_cache_len=cache_len, compile_config=cc)  # fmt: skip
            out.cpu()

    def gen_cpu(n: int) -> None:
        with torch.no_grad():
            cpu_model.generate(**p_cpu, max_new_tokens=n, min_new_tokens=n, do_sample=False)

    try:
        before = clocks.snapshot().sim_device_s
        dev_tok = _per_token(gen_dev)
        modeled = (clocks.snapshot().sim_device_s - before) / (2 + 4 + 12)
        cpu_tok = _per_token(gen_cpu)
        figures |= {"decode_token_s": dev_tok, "cpu_decode_token_s": cpu_tok, "decode_ratio": dev_tok / cpu_tok,
                    "modeled_device_token_s": modeled}  # fmt: skip
    except Exception as exc:
        runner.notes.append(f"decode per token not measured: {type(exc).__name__}: {exc}"[:300])
    return figures
