"""The zoo's models: tiny random-weight ``transformers`` models built from configs only (never weights).

Each :class:`ModelSpec` names a ``transformers`` config class and model class, the few config fields
that make it tiny, its family and its task; :func:`build` makes the CPU model with a fixed seed and
dropout switched off (so CPU and device runs are comparable), :func:`make_inputs` a seeded batch.
Nothing is downloaded: ``HF_HUB_OFFLINE=1`` is set before ``transformers`` is imported.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field
from typing import Any

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

VOCAB = 96
SEQ = 8
BATCH = 2
SEED = 0

_DEC = {"vocab_size": VOCAB, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2}
_HEADS = {"num_attention_heads": 4, "num_key_value_heads": 4}
_GQA = {"num_attention_heads": 4, "num_key_value_heads": 2}
_ENC = {
    "vocab_size": VOCAB,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "max_position_embeddings": 64,
}
_VIT = {"image_size": 32, "patch_size": 8, "num_channels": 3, "hidden_size": 32, "intermediate_size": 64}
_VIT |= {"num_hidden_layers": 2, "num_attention_heads": 4, "num_labels": 5}

_W2V = {
    "vocab_size": 16,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 64,
    "conv_dim": [8, 8],
    "conv_stride": [4, 4],
    "conv_kernel": [8, 4],
    "num_conv_pos_embeddings": 8,
    "num_conv_pos_embedding_groups": 4,
    "do_stable_layer_norm": True,
    "mask_time_prob": 0.0,
    "ctc_loss_reduction": "mean",
    "pad_token_id": 0,
}
_S2S = {
    "vocab_size": VOCAB,
    "d_model": 32,
    "encoder_layers": 2,
    "decoder_layers": 2,
    "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "encoder_ffn_dim": 64,
    "decoder_ffn_dim": 64,
    "max_position_embeddings": 64,
}
_MOE = {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32}


@dataclass(frozen=True)
class ModelSpec:
    """One zoo entry: which classes to build, how small, and what it does."""

    name: str
    family: str
    config: str  # transformers config class name
    model: str  # transformers model class name
    kwargs: dict[str, Any] = field(default_factory=dict)
    task: str = "causal-lm"  # causal-lm, masked-lm, seq2seq, image, whisper, ctc
    note: str = ""

    @property
    def generates(self) -> bool:
        """True when the model has a language-modelling head that ``generate`` drives."""
        return self.task in ("causal-lm", "seq2seq", "whisper")


SPECS: tuple[ModelSpec, ...] = (
    # decoder-only, tied embeddings
    ModelSpec("gpt2", "decoder (tied)", "GPT2Config", "GPT2LMHeadModel",
              {"vocab_size": VOCAB, "n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 64}),
    ModelSpec("opt", "decoder (tied)", "OPTConfig", "OPTForCausalLM",
              {"vocab_size": VOCAB, "hidden_size": 32, "ffn_dim": 64, "num_hidden_layers": 2,
               "num_attention_heads": 4, "word_embed_proj_dim": 32, "max_position_embeddings": 64}),
    ModelSpec("bloom", "decoder (tied, ALiBi)", "BloomConfig", "BloomForCausalLM",
              {"vocab_size": VOCAB, "hidden_size": 32, "n_layer": 2, "n_head": 4}),
    ModelSpec("gemma2", "decoder (tied, sliding window, softcap)", "Gemma2Config", "Gemma2ForCausalLM",
              {**_DEC, **_GQA, "head_dim": 8, "sliding_window": 4, "max_position_embeddings": 64}),
    ModelSpec("qwen2", "decoder (tied, GQA)", "Qwen2Config", "Qwen2ForCausalLM",
              {**_DEC, **_GQA, "tie_word_embeddings": True, "max_position_embeddings": 64}),
    # decoder-only, untied
    ModelSpec("llama", "decoder (GQA)", "LlamaConfig", "LlamaForCausalLM",
              {**_DEC, **_GQA, "max_position_embeddings": 64}),
    ModelSpec("mistral", "decoder (GQA, sliding window)", "MistralConfig", "MistralForCausalLM",
              {**_DEC, **_GQA, "sliding_window": 4, "max_position_embeddings": 64}),
    ModelSpec("qwen3", "decoder (GQA, qk-norm)", "Qwen3Config", "Qwen3ForCausalLM",
              {**_DEC, **_GQA, "head_dim": 8, "max_position_embeddings": 64}),
    ModelSpec("phi3", "decoder (fused qkv)", "Phi3Config", "Phi3ForCausalLM",
              {**_DEC, **_HEADS, "max_position_embeddings": 64, "pad_token_id": 0}),
    ModelSpec("gpt_neox", "decoder (parallel residual)", "GPTNeoXConfig", "GPTNeoXForCausalLM",
              {**_DEC, "num_attention_heads": 4, "max_position_embeddings": 64}),
    ModelSpec("falcon", "decoder (multi-query)", "FalconConfig", "FalconForCausalLM",
              {"vocab_size": VOCAB, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
               "new_decoder_architecture": False, "multi_query": True}),
    ModelSpec("stablelm", "decoder (partial rotary)", "StableLmConfig", "StableLmForCausalLM",
              {**_DEC, **_HEADS, "max_position_embeddings": 64}),
    # mixture of experts
    ModelSpec("mixtral", "decoder (MoE, GQA)", "MixtralConfig", "MixtralForCausalLM",
              {**_DEC, **_GQA, "num_local_experts": 4, "num_experts_per_tok": 2, "max_position_embeddings": 64,
               "output_router_logits": True}),
    ModelSpec("qwen2_moe", "decoder (MoE, shared expert)", "Qwen2MoeConfig", "Qwen2MoeForCausalLM",
              {**_DEC, **_GQA, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
               "shared_expert_intermediate_size": 32, "max_position_embeddings": 64}),
    # state space
    ModelSpec("mamba", "state space", "MambaConfig", "MambaForCausalLM",
              {"vocab_size": VOCAB, "hidden_size": 32, "state_size": 8, "num_hidden_layers": 2, "expand": 2,
               "conv_kernel": 4}),
    # encoder-only
    ModelSpec("bert", "encoder", "BertConfig", "BertForMaskedLM", dict(_ENC), task="masked-lm"),
    ModelSpec("roberta", "encoder", "RobertaConfig", "RobertaForMaskedLM",
              {**_ENC, "pad_token_id": 1, "max_position_embeddings": 66}, task="masked-lm"),
    ModelSpec("distilbert", "encoder", "DistilBertConfig", "DistilBertForMaskedLM",
              {"vocab_size": VOCAB, "dim": 32, "hidden_dim": 64, "n_layers": 2, "n_heads": 4,
               "max_position_embeddings": 64}, task="masked-lm"),
    ModelSpec("albert", "encoder (shared layers)", "AlbertConfig", "AlbertForMaskedLM",
              {**_ENC, "embedding_size": 16}, task="masked-lm"),
    ModelSpec("electra", "encoder", "ElectraConfig", "ElectraForMaskedLM",
              {**_ENC, "embedding_size": 32}, task="masked-lm"),
    ModelSpec("deberta_v2", "encoder (relative attention)", "DebertaV2Config", "DebertaV2ForMaskedLM",
              dict(_ENC), task="masked-lm"),
    # encoder-decoder
    ModelSpec("t5", "encoder-decoder (position bias)", "T5Config", "T5ForConditionalGeneration",
              {"vocab_size": VOCAB, "d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 2, "num_heads": 4,
               "decoder_start_token_id": 0}, task="seq2seq"),
    ModelSpec("bart", "encoder-decoder (tied)", "BartConfig", "BartForConditionalGeneration",
              {"vocab_size": VOCAB, "d_model": 32, "encoder_layers": 2, "decoder_layers": 2,
               "encoder_attention_heads": 4, "decoder_attention_heads": 4, "encoder_ffn_dim": 64,
               "decoder_ffn_dim": 64, "max_position_embeddings": 64}, task="seq2seq"),
    # vision
    ModelSpec("vit", "vision (ViT)", "ViTConfig", "ViTForImageClassification", dict(_VIT), task="image"),
    ModelSpec("deit", "vision (ViT, distillation token)", "DeiTConfig", "DeiTForImageClassification",
              dict(_VIT), task="image"),
    ModelSpec("resnet", "vision (conv, batch norm)", "ResNetConfig", "ResNetForImageClassification",
              {"embedding_size": 8, "hidden_sizes": [8, 16], "depths": [1, 1], "layer_type": "basic",
               "num_labels": 5}, task="image"),
    ModelSpec("convnext", "vision (conv, layer norm)", "ConvNextConfig", "ConvNextForImageClassification",
              {"hidden_sizes": [8, 16], "depths": [1, 1], "num_stages": 2, "num_labels": 5}, task="image"),
    # speech
    ModelSpec("whisper", "speech (encoder-decoder)", "WhisperConfig", "WhisperForConditionalGeneration",
              {"vocab_size": VOCAB, "d_model": 32, "encoder_layers": 1, "decoder_layers": 1,
               "encoder_attention_heads": 4, "decoder_attention_heads": 4, "encoder_ffn_dim": 64,
               "decoder_ffn_dim": 64, "num_mel_bins": 8, "max_source_positions": 8, "max_target_positions": 32,
               "decoder_start_token_id": 1, "pad_token_id": 0, "eos_token_id": 2, "bos_token_id": 1,
               "begin_suppress_tokens": None, "suppress_tokens": None}, task="whisper"),
    ModelSpec("wav2vec2", "speech (conv + encoder, CTC)", "Wav2Vec2Config", "Wav2Vec2ForCTC",
              {"vocab_size": 16, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
               "intermediate_size": 64, "conv_dim": [8, 8], "conv_stride": [4, 4], "conv_kernel": [8, 4],
               "num_conv_pos_embeddings": 8, "num_conv_pos_embedding_groups": 4, "do_stable_layer_norm": True,
               "mask_time_prob": 0.0, "ctc_loss_reduction": "mean", "pad_token_id": 0}, task="ctc"),
    # added in the third release: more decoders, MoE and multi-latent attention, encoders, encoder-decoders,
    # vision and speech models (each row is a transformers architecture the zoo did not have)
    ModelSpec("gemma", "decoder (tied, GeGLU)", "GemmaConfig", "GemmaForCausalLM",
              {**_DEC, **_GQA, "head_dim": 8, "max_position_embeddings": 64}),
    ModelSpec("gemma3", "decoder (tied, sliding/global, qk-norm)", "Gemma3TextConfig", "Gemma3ForCausalLM",
              {**_DEC, **_GQA, "head_dim": 8, "sliding_window": 4, "max_position_embeddings": 64}),
    ModelSpec("cohere", "decoder (parallel block, logit scale)", "CohereConfig", "CohereForCausalLM",
              {**_DEC, **_GQA, "max_position_embeddings": 64}),
    ModelSpec("olmo2", "decoder (post-norm, qk-norm)", "Olmo2Config", "Olmo2ForCausalLM",
              {**_DEC, **_GQA, "max_position_embeddings": 64}),
    ModelSpec("granite", "decoder (scaled residuals)", "GraniteConfig", "GraniteForCausalLM",
              {**_DEC, **_GQA, "max_position_embeddings": 64}),
    ModelSpec("phi", "decoder (parallel, partial rotary)", "PhiConfig", "PhiForCausalLM",
              {**_DEC, **_HEADS, "max_position_embeddings": 64}),
    ModelSpec("gptj", "decoder (parallel, rotary)", "GPTJConfig", "GPTJForCausalLM",
              {"vocab_size": VOCAB, "n_embd": 32, "n_layer": 2, "n_head": 4, "rotary_dim": 4, "n_positions": 64}),
    ModelSpec("codegen", "decoder (fused qkv, rotary)", "CodeGenConfig", "CodeGenForCausalLM",
              {"vocab_size": VOCAB, "n_embd": 32, "n_layer": 2, "n_head": 4, "rotary_dim": 4, "n_positions": 64,
               "n_ctx": 64}),
    ModelSpec("starcoder2", "decoder (GQA, sliding window, bias)", "Starcoder2Config", "Starcoder2ForCausalLM",
              {**_DEC, **_GQA, "sliding_window": 4, "max_position_embeddings": 64}),
    ModelSpec("gpt_bigcode", "decoder (multi-query)", "GPTBigCodeConfig", "GPTBigCodeForCausalLM",
              {"vocab_size": VOCAB, "n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 64}),
    ModelSpec("mpt", "decoder (ALiBi, no bias)", "MptConfig", "MptForCausalLM",
              {"vocab_size": VOCAB, "d_model": 32, "n_layers": 2, "n_heads": 4, "max_seq_len": 64}),
    ModelSpec("smollm3", "decoder (NoPE layers)", "SmolLM3Config", "SmolLM3ForCausalLM",
              {**_DEC, **_GQA, "max_position_embeddings": 64, "pad_token_id": 0}),
    ModelSpec("nemotron", "decoder (squared ReLU, layer norm 1p)", "NemotronConfig", "NemotronForCausalLM",
              {**_DEC, **_GQA, "head_dim": 8, "max_position_embeddings": 64}),
    ModelSpec("qwen3_moe", "decoder (MoE, qk-norm)", "Qwen3MoeConfig", "Qwen3MoeForCausalLM",
              {**_DEC, **_GQA, **_MOE, "head_dim": 8, "max_position_embeddings": 64}),
    ModelSpec("olmoe", "decoder (MoE, 64-style routing)", "OlmoeConfig", "OlmoeForCausalLM",
              {**_DEC, **_GQA, "num_experts": 4, "num_experts_per_tok": 2, "max_position_embeddings": 64}),
    ModelSpec("granitemoe", "decoder (MoE, scaled residuals)", "GraniteMoeConfig", "GraniteMoeForCausalLM",
              {**_DEC, **_GQA, "num_local_experts": 4, "num_experts_per_tok": 2, "max_position_embeddings": 64}),
    ModelSpec("deepseek_v3", "decoder (MoE, multi-latent attention)", "DeepseekV3Config", "DeepseekV3ForCausalLM",
              {**_DEC, **_HEADS, "moe_intermediate_size": 32, "n_routed_experts": 4, "num_experts_per_tok": 2,
               "n_shared_experts": 1, "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1,
               "q_lora_rank": 16, "kv_lora_rank": 16, "qk_rope_head_dim": 4, "qk_nope_head_dim": 4,
               "v_head_dim": 8, "max_position_embeddings": 64}),
    ModelSpec("deepseek_v2", "decoder (MoE, multi-latent attention)", "DeepseekV2Config", "DeepseekV2ForCausalLM",
              {**_DEC, **_HEADS, "moe_intermediate_size": 32, "n_routed_experts": 4, "num_experts_per_tok": 2,
               "n_shared_experts": 1, "first_k_dense_replace": 1, "q_lora_rank": 16, "kv_lora_rank": 16,
               "qk_rope_head_dim": 4, "qk_nope_head_dim": 4, "v_head_dim": 8, "max_position_embeddings": 64}),
    ModelSpec("falcon_mamba", "state space (RMS-normed)", "FalconMambaConfig", "FalconMambaForCausalLM",
              {"vocab_size": VOCAB, "hidden_size": 32, "state_size": 8, "num_hidden_layers": 2, "expand": 2,
               "conv_kernel": 4}),
    ModelSpec("xlm_roberta", "encoder", "XLMRobertaConfig", "XLMRobertaForMaskedLM",
              {**_ENC, "pad_token_id": 1, "max_position_embeddings": 66}, task="masked-lm"),
    ModelSpec("mobilebert", "encoder (bottleneck)", "MobileBertConfig", "MobileBertForMaskedLM",
              {**_ENC, "embedding_size": 16, "intra_bottleneck_size": 16, "true_hidden_size": 16,
               "num_feedforward_networks": 1}, task="masked-lm"),
    ModelSpec("mbart", "encoder-decoder (pre-norm)", "MBartConfig", "MBartForConditionalGeneration",
              dict(_S2S), task="seq2seq"),
    ModelSpec("pegasus", "encoder-decoder (sinusoidal positions)", "PegasusConfig", "PegasusForConditionalGeneration",
              dict(_S2S), task="seq2seq"),
    ModelSpec("marian", "encoder-decoder (translation)", "MarianConfig", "MarianMTModel",
              {**_S2S, "decoder_start_token_id": 0, "pad_token_id": 0}, task="seq2seq"),
    ModelSpec("swin", "vision (shifted windows)", "SwinConfig", "SwinForImageClassification",
              {"image_size": 32, "patch_size": 4, "embed_dim": 16, "depths": [1, 1], "num_heads": [2, 4],
               "window_size": 4, "num_labels": 5}, task="image"),
    ModelSpec("beit", "vision (relative position bias)", "BeitConfig", "BeitForImageClassification",
              {**_VIT, "use_relative_position_bias": True}, task="image"),
    ModelSpec("dinov2", "vision (ViT, layer scale)", "Dinov2Config", "Dinov2ForImageClassification",
              {**_VIT, "mlp_ratio": 2}, task="image"),
    ModelSpec("regnet", "vision (grouped conv)", "RegNetConfig", "RegNetForImageClassification",
              {"embedding_size": 8, "hidden_sizes": [8, 16], "depths": [1, 1], "groups_width": 4,
               "num_labels": 5}, task="image"),
    ModelSpec("convnextv2", "vision (conv, global response norm)", "ConvNextV2Config",
              "ConvNextV2ForImageClassification",
              {"hidden_sizes": [8, 16], "depths": [1, 1], "num_stages": 2, "num_labels": 5}, task="image"),
    ModelSpec("hubert", "speech (conv + encoder, CTC)", "HubertConfig", "HubertForCTC", dict(_W2V), task="ctc"),
    ModelSpec("wavlm", "speech (gated relative position, CTC)", "WavLMConfig", "WavLMForCTC",
              {**_W2V, "num_buckets": 16, "max_bucket_distance": 16}, task="ctc"),
)  # fmt: skip

QUICK = ("gpt2", "llama", "mixtral", "bert", "t5", "vit")


def select(patterns: str | None = None, quick: bool = False) -> list[ModelSpec]:
    """Specs whose names match any comma-separated glob (all if none); ``quick`` = the CI subset.

    Raises ``ValueError`` naming the known models when a pattern matches nothing.
    """
    specs = [s for s in SPECS if s.name in QUICK] if quick and not patterns else list(SPECS)
    if not patterns:
        return specs
    globs = [g.strip() for g in patterns.split(",") if g.strip()]
    chosen = [s for s in specs if any(fnmatch.fnmatchcase(s.name, g) for g in globs)]
    unmatched = [g for g in globs if not any(fnmatch.fnmatchcase(s.name, g) for s in specs)]
    if unmatched:
        raise ValueError(f"no zoo model matches {unmatched}; known: {', '.join(s.name for s in SPECS)}")
    return chosen


def spec(name: str) -> ModelSpec:
    """The spec called ``name``; raises ``KeyError`` naming the known ones."""
    for s in SPECS:
        if s.name == name:
            return s
    raise KeyError(f"no zoo model {name!r}; known: {', '.join(s.name for s in SPECS)}")


def build(s: ModelSpec) -> torch.nn.Module:
    """The CPU model of ``s``: seeded random weights, dropout off, float32, eval mode."""
    import transformers

    config = getattr(transformers, s.config)(**s.kwargs)
    for key, value in list(vars(config).items()):  # dropout off: CPU and device must see the same function
        if isinstance(value, float) and (
            "dropout" in key or "pdrop" in key or "drop_path" in key or key.endswith("_drop")
        ):
            setattr(config, key, 0.0)
    for key in ("layerdrop", "encoder_layerdrop", "decoder_layerdrop", "mask_time_prob", "mask_feature_prob"):
        if hasattr(config, key):
            setattr(config, key, 0.0)
    torch.manual_seed(SEED)
    model = getattr(transformers, s.model)(config)
    return model.float().eval()


def make_inputs(s: ModelSpec, model: torch.nn.Module, labels: bool) -> dict[str, torch.Tensor]:
    """A seeded CPU batch for ``s`` (with ``labels`` when asked and the task has them)."""
    g = torch.Generator().manual_seed(SEED + 1)
    cfg = model.config
    if s.task == "image":
        px = torch.randn(BATCH, cfg.num_channels, 32, 32, generator=g)
        out = {"pixel_values": px}
        if labels:
            out["labels"] = torch.randint(0, cfg.num_labels, (BATCH,), generator=g)
        return out
    if s.task == "whisper":
        feats = torch.randn(BATCH, cfg.num_mel_bins, 2 * cfg.max_source_positions, generator=g)
        dec = torch.randint(3, cfg.vocab_size, (BATCH, 4), generator=g)
        dec[:, 0] = cfg.decoder_start_token_id
        out = {"input_features": feats, "decoder_input_ids": dec}
        if labels:
            out["labels"] = torch.randint(3, cfg.vocab_size, (BATCH, 4), generator=g)
        return out
    if s.task == "ctc":
        out = {"input_values": torch.randn(BATCH, 400, generator=g)}
        if labels:
            out["labels"] = torch.randint(1, cfg.vocab_size, (BATCH, 5), generator=g)
        return out
    ids = torch.randint(3, cfg.vocab_size, (BATCH, SEQ), generator=g)
    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    mask[1, -2:] = 0  # right padding on the second row: exercises the attention-mask paths
    out = {"input_ids": ids, "attention_mask": mask}
    if s.task == "seq2seq":
        dec = torch.randint(3, cfg.vocab_size, (BATCH, 5), generator=g)
        out["decoder_input_ids"] = dec
        if labels:
            out["labels"] = torch.randint(3, cfg.vocab_size, (BATCH, 5), generator=g)
        return out
    if s.name == "mamba":
        out.pop("attention_mask")  # Mamba has no attention
    if labels:
        out["labels"] = ids.masked_fill(mask == 0, -100) if "attention_mask" in out else ids.clone()
    return out


def prompt(s: ModelSpec, model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The generation prompt (one unpadded row; encoder input for encoder-decoders)."""
    g = torch.Generator().manual_seed(SEED + 2)
    cfg = model.config
    if s.task == "whisper":
        return {"input_features": torch.randn(1, cfg.num_mel_bins, 2 * cfg.max_source_positions, generator=g)}
    return {"input_ids": torch.randint(3, cfg.vocab_size, (1, 6), generator=g)}
