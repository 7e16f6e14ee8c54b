"""Tensor parallelism of a planned model, with PyTorch's own ``parallelize_module`` styles.

Two plans, the second preferred where the model has its shape:

* **Megatron** (any model with q/k/v/o and gate/up/down ``nn.Linear`` projections in its repeated layers):
  ``ColwiseParallel`` on q/k/v and gate/up, ``RowwiseParallel`` on o and down; the rest replicated.
* **Sequence parallel with vocabulary-parallel embedding and head** (a Llama-shaped causal LM: ``embed_tokens``,
  ``norm``, ``lm_head`` untied, layers with ``input_layernorm``, ``self_attn``, ``post_attention_layernorm``,
  ``mlp``): torchtitan's Llama plan, as NxD Training's ``sequence_parallel_enabled`` runs Llama. The residual
  stream and the norms are sharded on the sequence (``SequenceParallel``); attention and MLP inputs are
  all-gathered, their outputs reduce-scattered; the embedding is split by vocabulary (``RowwiseParallel``), the
  head by vocabulary with the loss computed on the shards (``loss_parallel``). Attention is causal flash
  attention without a mask tensor (:data:`CAUSAL`), as the training kernels run it.
"""

from __future__ import annotations

import contextlib
from typing import Any

from torch import nn

_COLWISE = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")
_ROWWISE = ("o_proj", "down_proj")
_LAYER_PARTS = ("input_layernorm", "self_attn", "post_attention_layernorm", "mlp")
CAUSAL = "trn_notebook_causal_sdpa"  # the attention implementation name registered with transformers


def megatron(layers: list[nn.Module], mesh: Any) -> int:
    """Split the projections of ``layers`` column- and row-wise on ``mesh``; returns how many were split."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    sharded = 0
    for layer in layers:
        plan: dict[str, Any] = {}
        for name, mod in layer.named_modules():
            leaf = name.rsplit(".", 1)[-1]
            if isinstance(mod, nn.Linear) and leaf in _COLWISE:
                plan[name] = ColwiseParallel()
            elif isinstance(mod, nn.Linear) and leaf in _ROWWISE:
                plan[name] = RowwiseParallel()
        if plan:
            parallelize_module(layer, mesh, plan)
            sharded += len(plan)
    return sharded


def sequence_parallel_applies(model: nn.Module, config: Any) -> bool:
    """Whether ``model`` has the Llama shape the sequence-parallel plan needs (and untied embeddings)."""
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if config is None or getattr(config, "tie_word_embeddings", False) or not isinstance(layers, nn.ModuleList):
        return False
    if not all(hasattr(inner, n) for n in ("embed_tokens", "norm")) or not isinstance(model.lm_head, nn.Linear):
        return False
    return all(all(hasattr(layer, p) for p in _LAYER_PARTS) for layer in layers)


def sequence_parallel(model: nn.Module, mesh: Any) -> None:
    """Lay ``model`` out with the sequence-parallel plan (module docstring); its attention becomes causal."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )

    _register_causal_attention()
    model.config._attn_implementation = CAUSAL
    parallelize_module(
        model,
        mesh,
        {
            "model.embed_tokens": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
            "model.norm": SequenceParallel(),
            "lm_head": ColwiseParallel(input_layouts=Shard(1), output_layouts=Shard(-1), use_local_output=False),
        },
    )
    seq, full = Shard(1), Replicate()
    for layer in model.model.layers:  # type: ignore[union-attr]
        plan: dict[str, Any] = {
            "input_layernorm": SequenceParallel(),
            "self_attn": PrepareModuleInput(
                input_kwarg_layouts={"hidden_states": seq}, desired_input_kwarg_layouts={"hidden_states": full}
            ),
            "post_attention_layernorm": SequenceParallel(),
            "mlp": PrepareModuleInput(input_layouts=(seq,), desired_input_layouts=(full,)),
        }
        for name, mod in layer.named_modules():
            leaf = name.rsplit(".", 1)[-1]
            if isinstance(mod, nn.Linear) and leaf in _COLWISE:
                plan[name] = ColwiseParallel()
            elif isinstance(mod, nn.Linear) and leaf in _ROWWISE:
                plan[name] = RowwiseParallel(output_layouts=seq)
        parallelize_module(layer, mesh, plan)


def loss_on_shards() -> contextlib.AbstractContextManager[None]:
    """``torch.distributed.tensor.parallel.loss_parallel``: the cross-entropy of vocabulary-sharded logits."""
    from torch.distributed.tensor.parallel import loss_parallel

    return loss_parallel()


def _register_causal_attention() -> None:
    """Register :data:`CAUSAL` with transformers (once): SDPA with ``is_causal=True`` and no mask tensor."""
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import AttentionMaskInterface

    if CAUSAL in AttentionInterface._global_mapping:
        return

    def causal(module: nn.Module, query: Any, key: Any, value: Any, attention_mask: Any, **kwargs: Any) -> Any:
        kwargs.pop("is_causal", None)
        return sdpa_attention_forward(module, query, key, value, None, is_causal=True, **kwargs)

    AttentionInterface.register(CAUSAL, causal)
    AttentionMaskInterface.register(CAUSAL, lambda *args, **kwargs: None)
