"""Full-size model configurations of the published Trainium2 rows, as ``transformers`` configs.

Dimensions are the models' published ones (their Hugging Face ``config.json``, as reproduced by
``transformers``' own config defaults where the docstring names the checkpoint). Where we do not
have the published dimensions, :attr:`ModelSpec.approximation` says what was approximated. No
weights are ever downloaded: the configs are built in memory and the models walked on fake tensors.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ModelSpec:
    """A model the ledger walks: how to build its config, and the facts the layout model needs."""

    name: str
    family: str  # llama, mixtral, qwen3, qwen3_5, qwen3_5_moe, afmoe, deepseek_v3
    params: dict[str, Any]
    source: str
    approximation: str = ""
    # parameter-name patterns (regular expressions) the deployment keeps whole on every TP rank, with
    # the source that says so; MoE routers are added for every MoE model (:meth:`is_replicated`)
    replicated: tuple[str, ...] = ()

    def config(self) -> Any:
        """The ``transformers`` config object (raises ``ImportError`` without ``transformers``)."""
        return _BUILDERS[self.family](self.params)

    @property
    def key(self) -> str:
        """Identity of the configuration (name + a digest of its parameters): two user configs that
        share a name are not confused by the walk cache."""
        digest = hashlib.sha1(json.dumps(self.params, sort_keys=True, default=str).encode()).hexdigest()[:12]
        return f"{self.name}|{digest}"

    @property
    def layers(self) -> int:
        """Decoder layers (each has two TP all-reduces: after attention and after the MLP)."""
        return int(self.params["num_hidden_layers"])

    @property
    def hidden(self) -> int:
        """Hidden size (the all-reduced activation width)."""
        return int(self.params["hidden_size"])

    @property
    def kv_heads(self) -> int:
        """K/V heads of the attention layers (replicated across ranks when fewer than TP)."""
        return int(self.params.get("num_key_value_heads", self.params.get("num_attention_heads", 1)))

    @property
    def is_moe(self) -> bool:
        """True for mixture-of-experts models."""
        if self.family == "auto":
            return any(self.params.get(k) for k in ("num_experts", "n_routed_experts", "num_local_experts"))
        return self.family in ("mixtral", "qwen3_5_moe", "afmoe", "deepseek_v3")

    def is_replicated(self, param_name: str) -> bool:
        """Whether NxD Inference keeps this parameter whole on every TP rank: the spec's ``replicated``
        patterns, and for MoE models the router (neuronx-distributed ``RouterTopK.linear_router`` is a
        plain ``torch.nn.Linear``, not a parallel layer)."""
        patterns = self.replicated + ((ROUTER,) if self.is_moe else ())
        return any(re.search(p, param_name) for p in patterns)

    @classmethod
    def from_config(cls, config: Any, name: str | None = None) -> ModelSpec:
        """A spec of a user's ``transformers`` config (rebuilt with ``AutoConfig.for_model``); raises
        ``ValueError`` when the config lacks the layer count or hidden size the layout model needs."""
        params = config.to_dict()
        text = params.get("text_config")
        if isinstance(text, dict) and "num_hidden_layers" not in params:
            params = text | {"model_type": text.get("model_type", params["model_type"])}
        for key in ("num_hidden_layers", "hidden_size", "model_type"):
            if key not in params:
                raise ValueError(f"config {type(config).__name__} has no {key!r}: not a decoder LM config")
        label = name or str(params.get("_name_or_path") or "") or str(params["model_type"])
        return cls(label, "auto", params, f"user config ({type(config).__name__})")


def _llama(p: dict[str, Any]) -> Any:
    from transformers import LlamaConfig

    return LlamaConfig(**p)


def _mixtral(p: dict[str, Any]) -> Any:
    from transformers import MixtralConfig

    return MixtralConfig(**p)


def _qwen3(p: dict[str, Any]) -> Any:
    from transformers import Qwen3Config

    return Qwen3Config(**p)


def _qwen3_5(p: dict[str, Any]) -> Any:
    from transformers import Qwen3_5TextConfig

    return Qwen3_5TextConfig(**p)


def _qwen3_5_moe(p: dict[str, Any]) -> Any:
    from transformers import Qwen3_5MoeTextConfig

    return Qwen3_5MoeTextConfig(**p)


def _afmoe(p: dict[str, Any]) -> Any:
    from transformers import AfmoeConfig

    return AfmoeConfig(**p)


def _deepseek_v3(p: dict[str, Any]) -> Any:
    from transformers import DeepseekV3Config

    return DeepseekV3Config(**p)


def _auto(p: dict[str, Any]) -> Any:
    from transformers import AutoConfig

    rest = {k: v for k, v in p.items() if k not in ("model_type", "transformers_version", "architectures")}
    return AutoConfig.for_model(p["model_type"], **rest)


ROUTER = r"\.mlp\.(gate|router)(\.gate|\.linear)?\.weight$"  # the MoE router's weight in transformers' models

_BUILDERS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "auto": _auto,
    "llama": _llama,
    "mixtral": _mixtral,
    "qwen3": _qwen3,
    "qwen3_5": _qwen3_5,
    "qwen3_5_moe": _qwen3_5_moe,
    "afmoe": _afmoe,
    "deepseek_v3": _deepseek_v3,
}

_LLAMA3 = {"vocab_size": 128256, "hidden_act": "silu", "rope_theta": 500000.0, "max_position_embeddings": 131072}

LLAMA_8B = ModelSpec(
    "Llama-3.1-8B",
    "llama",
    _LLAMA3
    | {"hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32}
    | {"num_key_value_heads": 8},
    "meta-llama/Llama-3.1-8B config.json (published dimensions)",
)
LLAMA_70B = ModelSpec(
    "Llama-3.3-70B",
    "llama",
    _LLAMA3
    | {"hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80, "num_attention_heads": 64}
    | {"num_key_value_heads": 8},
    "meta-llama/Llama-3.3-70B-Instruct config.json (published dimensions)",
)
BERT_LARGE = ModelSpec(
    "BERT-Large",
    "auto",
    {"model_type": "bert", "vocab_size": 30522, "hidden_size": 1024, "num_hidden_layers": 24}
    | {"num_attention_heads": 16, "intermediate_size": 4096, "max_position_embeddings": 512},
    "google-research/bert BERT-Large uncased (published dimensions; the NxD script's phase-1 model)",
)
VIT_BASE = ModelSpec(
    "ViT-Base/16",
    "auto",
    {"model_type": "vit", "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12}
    | {"intermediate_size": 3072, "image_size": 224, "patch_size": 16, "num_labels": 10},
    "google/vit-base-patch16-224 (published dimensions), a 10-class head for CIFAR-10 as the row's script fine-tunes",
)
MIXTRAL_8X7B = ModelSpec(
    "Mixtral-8x7B",
    "mixtral",
    {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32}
    | {"num_attention_heads": 32, "num_key_value_heads": 8, "num_local_experts": 8, "num_experts_per_tok": 2}
    | {"rope_theta": 1000000.0, "max_position_embeddings": 32768, "sliding_window": None},
    "mistralai/Mixtral-8x7B-v0.1 config.json (published dimensions)",
)
QWEN3_32B = ModelSpec(
    "Qwen3-32B",
    "qwen3",
    {"vocab_size": 151936, "hidden_size": 5120, "intermediate_size": 25600, "num_hidden_layers": 64}
    | {"num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128, "rope_theta": 1000000.0}
    | {"max_position_embeddings": 40960, "tie_word_embeddings": False},
    "Qwen/Qwen3-32B config.json (published dimensions)",
)
# DeepSeek-V3's published dimensions are transformers' DeepseekV3Config defaults (its docstring names
# deepseek-ai/DeepSeek-V3); listed here so the row states them.
DEEPSEEK_V3 = ModelSpec(
    "DeepSeek-V3",
    "deepseek_v3",
    {"hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048, "num_hidden_layers": 61}
    | {"num_attention_heads": 128, "num_key_value_heads": 128, "n_routed_experts": 256, "n_shared_experts": 1}
    | {"num_experts_per_tok": 8, "first_k_dense_replace": 3, "q_lora_rank": 1536, "kv_lora_rank": 512}
    | {"qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 129280},
    "deepseek-ai/DeepSeek-V3 config.json (= transformers DeepseekV3Config defaults)",
    # NxD Inference's MLA keeps the low-rank down-projections whole on every rank: ``q_a_proj`` and
    # ``kv_a_proj_with_mqa`` are ``nn.Linear`` (contrib/models/DeepSeek-V3/src/modeling_deepseek.py,
    # DeepseekV3Attention.init_mla_properties), only q_b/kv_b/o are parallel layers
    replicated=(r"self_attn\.q_a_proj\.", r"self_attn\.kv_a_proj_with_mqa\."),
)
# Qwen3.5 dense family. The 2B dimensions follow the NxD Inference contrib README (24 layers, 3 gated
# DeltaNet + 1 full attention, head_dim 256, 16 linear K/V heads of 128; hidden 2048 from the vision
# tower's out_hidden_size); 9B is transformers' Qwen3_5TextConfig default. 4B and 27B: dimensions
# chosen to give the named parameter count with the family's layer pattern (approximation).
_QWEN35 = {"vocab_size": 248320, "head_dim": 256, "linear_key_head_dim": 128, "linear_value_head_dim": 128}
QWEN35 = {
    "2B": ModelSpec(
        "Qwen3.5-2B",
        "qwen3_5",
        _QWEN35
        | {"hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 24, "num_attention_heads": 8}
        | {"num_key_value_heads": 2, "linear_num_key_heads": 16, "linear_num_value_heads": 16}
        | {"tie_word_embeddings": True},
        "NxD Inference contrib/models/Qwen3.5-2B/README.md (layer pattern, heads); FFN width assumed",
        "intermediate_size 6144 assumed (not stated in the README)",
    ),
    "4B": ModelSpec(
        "Qwen3.5-4B",
        "qwen3_5",
        _QWEN35
        | {"hidden_size": 2560, "intermediate_size": 9216, "num_hidden_layers": 32, "num_attention_heads": 16}
        | {"num_key_value_heads": 4, "linear_num_key_heads": 16, "linear_num_value_heads": 32}
        | {"tie_word_embeddings": True},
        "approximation",
        "dimensions chosen for ~4B parameters with the Qwen3.5 layer pattern (published config not available)",
    ),
    "9B": ModelSpec(
        "Qwen3.5-9B",
        "qwen3_5",
        _QWEN35
        | {"hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 32, "num_attention_heads": 16}
        | {"num_key_value_heads": 4, "linear_num_key_heads": 16, "linear_num_value_heads": 32},
        "transformers Qwen3_5TextConfig defaults",
        "the defaults are taken as Qwen3.5-9B's dimensions (the config does not name its checkpoint)",
    ),
    "27B": ModelSpec(
        "Qwen3.5-27B",
        "qwen3_5",
        _QWEN35
        | {"hidden_size": 5120, "intermediate_size": 17408, "num_hidden_layers": 64, "num_attention_heads": 24}
        | {"num_key_value_heads": 4, "linear_num_key_heads": 16, "linear_num_value_heads": 48},
        "NxD Inference contrib/models/Qwen3.5-35B-A3B/README.md ('Architecture diff vs dense Qwen3.5-27B' table)",
    ),
    "35B-A3B": ModelSpec(
        "Qwen3.5-35B-A3B",
        "qwen3_5_moe",
        {"vocab_size": 248320, "hidden_size": 2048, "num_hidden_layers": 40, "num_attention_heads": 16}
        | {"num_key_value_heads": 2, "head_dim": 256, "moe_intermediate_size": 512}
        | {"shared_expert_intermediate_size": 512, "num_experts_per_tok": 8, "num_experts": 256},
        "transformers Qwen3_5MoeTextConfig defaults (its docstring names Qwen/Qwen3.5-35B-A3B)",
    ),
}
# Trinity-Mini: the NxD Inference contrib README's architecture table (32 layers, 2 dense + 30 MoE,
# hidden 2048, 32 heads, 4 KV heads, head_dim 128, 128 experts top-8 + 1 shared, MoE intermediate
# 1024, dense 6144, sliding window 2048, full attention every 4th layer).
TRINITY_MINI = ModelSpec(
    "Trinity-Mini",
    "afmoe",
    {"hidden_size": 2048, "intermediate_size": 6144, "moe_intermediate_size": 1024, "num_hidden_layers": 32}
    | {"num_dense_layers": 2, "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128}
    | {"num_experts": 128, "num_experts_per_tok": 8, "num_shared_experts": 1, "vocab_size": 200192}
    | {"sliding_window": 2048, "global_attn_every_n_layers": 4},
    "NxD Inference contrib/models/Trinity/README.md (architecture table)",
)
