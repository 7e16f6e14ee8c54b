"""The ledger rows the model does not bring within 0.75-1.25x, and the cited mechanism behind each.

Each entry names a mechanism found in the published configuration or in the serving stack's source
(NxD Inference, optimum-neuron, the Neuron SDK docs) that the model does not carry, and why carrying
it would take a constant no source gives (so the row stays out of band and is listed, not fitted
away). :func:`implied_efficiency` and :func:`fused_step_ratio` compute the figures the reasons quote
from the model itself, so they follow the constants in force.
"""

from __future__ import annotations

from .ledger import Result

SDK = "aws-neuron-sdk"
NXDI = "neuronx-distributed-inference"

# (row id, metric, note) -> the cited mechanism
REASONS: tuple[tuple[tuple[str, str, str], str], ...] = (
    (
        ("R3", "TTFT", ""),
        "Llama-3.3-70B's prefill runs NxD Inference's NKI kernels: fused QKV, flash attention and MLP "
        f"(`--qkv-kernel-enabled --attn-kernel-enabled --mlp-kernel-enabled`, {SDK} "
        "libraries/nxd-inference/tutorials/trn2-llama3.3-70b-tutorial.rst; the QKV and MLP kernels default "
        "off, api-guides/api-guide.rst 'Kernels'), while the fit rows' configs that are published "
        "(Qwen3.5-2B, Qwen3.5-35B-A3B and Trinity contrib test configs) leave them at the default. The "
        "model carries the flash-attention kernel's causal tile skipping (on every trn2 prefill, as NxD "
        "Inference picks that kernel at LNC=2: fidelity/model.py `causal_attention_kernel`, which took this "
        "row from 1.71 to 1.59); the QKV and MLP kernels change no FLOPs, only how fast they run. Its "
        "published TTFT implies MFU {implied} on its padded FLOPs against the fitted {mfu}; an efficiency "
        "of the kernel path would be a fifth fitted constant. Not chunked prefill: vLLM serves it from the "
        "NxD Inference artifacts compiled with context-encoding buckets 2048/4096/8192/12288 and "
        "max-num-seqs 1 (same tutorial), so the 10,000-token prompt runs the 12,288 bucket in one graph",
    ),
    (
        ("R17", "ITL", "sampling on the host"),
        "with sampling on the CPU, optimum-neuron's decode graph gathers the fp32 logits of the static batch "
        "(lm_head `gather_output=not on_device_sampling`, optimum/neuron/models/inference/llama/modeling_llama.py) "
        "and copies batch x vocab x 4 B (32 x 128,256 x 4 = 16.4 MB) to the host, where the sampler runs "
        "`torch.topk` at `max_topk` 256 over every row (optimum/neuron/vllm/sampler.py -> "
        "models/inference/backend/modules/generation/sampling.py, on_cpu; backend/config.py). The model "
        "charges the copy and a host sort of every row (`model.host_sampling_s`: {host} ms at the assumed "
        "32 GB/s copy and host CPU rates) against the published ~24 ms 'device-to-host round trip'; no source "
        "gives inf2's host copy rate or the host sampler's time, so the row stays out",
    ),
    (
        ("R13", "TPOT", "batch 1"),
        f"the same README publishes batch 1 with the fused MoE token-generation NKI kernel at 9.1 ms "
        f"({NXDI} contrib/models/Trinity/README.md, 'Fused TKG': RMSNorm + router top-k + expert MLP in one "
        "kernel, 'reducing HBM round-trips'); the model fuses element-wise ops into their neighbours (no HBM "
        "traffic of their own), i.e. it prices the fused path: {fused} of 9.1 ms. The unfused path's extra "
        "~2.7 ms (11.8 - 9.1) is those round trips and kernel boundaries, which the model does not charge",
    ),
    (
        ("R11", "TTFT", "Qwen3.5-2B"),
        "TTFT is the wall time of a Hugging Face `generate(max_new_tokens=1)` through NxD Inference's "
        f"HuggingFaceGenerationAdapter ({NXDI} contrib/models/Qwen3.5-2B/test/integration/run_benchmark.py, "
        "`bench_once`, whose docstring counts it as 'prefill + first-decode'); the model prices one prefill "
        "graph plus the serving step, and the {gap} ms short is what that host generate loop adds beyond "
        "them at a prefill this small (across the Qwen3.5 rows, measured the same way, the shortfall "
        "shrinks as the prefill grows); no source times the loop",
    ),
    (
        ("R11", "TPOT", "Qwen3.5-9B"),
        "no cited mechanism found; its dimensions are an approximation (fidelity/configs.py: transformers' "
        "Qwen3_5TextConfig defaults taken as Qwen3.5-9B, whose config is not in the reference), and its "
        "published step is only 1.2 ms over the 4B's for ~2x the weights",
    ),
    (
        ("R11", "TTFT", "Qwen3.5-35B-A3B"),
        "the contrib README puts it on the shipped MoE kernel: prefill 'has to route 256 experts x 512 tokens "
        "= many small block-matmuls', and the TTFT/TPOT ratio 'is a consequence of the shipped kernel gap' "
        "(three MoE backends measured 480-567 ms at 16 tokens; "
        f"{NXDI} contrib/models/Qwen3.5-35B-A3B/README.md). The model prices the blockwise worst-case blocks "
        "(fidelity/moe.py) at the fitted MFU ({compute} ms of compute); the shipped kernel's per-block cost is "
        "not published. The block count is not the gap: the README's `use_torch_block_wise=True` backend (an "
        "unrolled per-block loop in the graph) measures a flat 553.8 / 554.0 / 553.6 ms at 16 / 64 / 256 "
        "tokens, every worst-case block computed whatever the prompt, as the model counts them; the default "
        "backend's 'dynamic while' kernel (480 ms, growing with the prompt) is sharded on the expert "
        "intermediate dimension at LNC=2. Kept out of the fit (fit.NOT_FITTABLE)",
    ),
    (
        ("R6", "TTFT", ""),
        "MoE context encoding, as for Qwen3.5-35B-A3B: the model prices the blockwise worst-case blocks "
        "(fidelity/moe.py) at the fitted MFU ({compute} ms of compute) and the README publishes no split of "
        "the 1,667 ms prefill. Kept out of the fit (fit.NOT_FITTABLE)",
    ),
)
COMPILE_REASONS: tuple[tuple[str, str], ...] = (
    (
        "Qwen3.5-2B TP8",
        f"the published ~90 s is the first run of run_text_smoke.py ({NXDI} contrib/models/Qwen3.5-2B/README.md, "
        "'Compile (first run only; ~90 s) and generate one prompt'), whose config sets `save_sharded_checkpoint=True`, "
        "and NxD Inference's `compile()` is trace + compile of the graphs and then `shard_weights()`, which with "
        "that flag shards and saves the 4.5 GB checkpoint (src/neuronx_distributed_inference/models/"
        "application_base.py). Its two small graphs model at {modeled} (their fixed part per graph, fitted on ViT-L's ~20 s native "
        "compile, and their instructions); the rest of the 90 s is sharding and saving, which grows with the "
        "checkpoint's bytes, not with graphs or instructions, and no source splits it",
    ),
)


def reason(row_id: str, metric: str, note: str) -> str | None:
    """The cited mechanism of a row the model leaves out of band (None: no entry)."""
    return next((text for key, text in REASONS if key == (row_id, metric, note)), None)


def compile_reason(label: str) -> str | None:
    """The cited mechanism of a compile row the model leaves out of band (None: no entry)."""
    return next((text for key, text in COMPILE_REASONS if key == label), None)


def implied_efficiency(result: Result, efficiency: float) -> float:
    """The compute efficiency at which ``result``'s modeled time would equal its published one, the other
    parts of its budget unchanged (compute scales as 1 / efficiency)."""
    b = result.budget
    rest = b.total_s - b.compute_s
    target = result.row.published - rest
    if b.compute_s <= 0 or target <= 0:
        return float("inf")
    return efficiency * b.compute_s / target


def fused_step_ratio(result: Result, fused_published_s: float = 9.1e-3) -> float:
    """Modeled step / the published fused-kernel step (Trinity-Mini batch 1, 'Fused TKG', 9.1 ms)."""
    return result.modeled / fused_published_s
