"""FlexAttention on ``neuron`` is refused at the call, eager or compiled, with what to use instead.

PyTorch's ``flex_attention`` checks the device of its inputs first (``_validate_device``) and accepts
cuda, cpu, xpu, hpu and mps only; its fused kernel comes from Inductor's Triton/C++ templates, which have
no neuron code generator, and TorchNeuron documents no FlexAttention support. So ``flex_attention`` and
transformers' ``attn_implementation="flex_attention"`` cannot run here. PyTorch's own refusal names
neither the reason nor the way out; this keeps its check (same ``ValueError``, same place: the first line
of ``flex_attention``) and says both. ``create_block_mask`` on neuron (a ``BlockMask`` serves only
``flex_attention``; transformers builds one first, compiled) is refused the same way where it turns the
dense mask into blocks, so ``create_mask`` (a dense mask, also useful for SDPA) still works. Every other
device goes through PyTorch's code unchanged.
"""

from __future__ import annotations

from typing import Any

FLEX_REFUSAL = (
    "flex_attention does not run on the neuron device: PyTorch's FlexAttention accepts cuda, cpu, xpu, hpu "
    "and mps only, and neither Inductor nor trn_notebook's neuron compiler (torch.compile(..., backend='neuron')) "
    "generates its fused kernel. Use torch.nn.functional.scaled_dot_product_attention with attn_mask / is_causal "
    "(native on neuron, compiles with backend='neuron'); in transformers pass attn_implementation='sdpa'."
)


def refuse_flex_attention_on_neuron() -> None:
    """Make ``flex_attention`` / ``create_block_mask`` on neuron raise ``ValueError(FLEX_REFUSAL)`` (idempotent)."""
    import torch.nn.attention.flex_attention as flex

    validate = flex._validate_device
    if getattr(validate, "_trn_notebook", False):
        return
    to_blocks = flex._convert_mask_to_block_mask

    def _validate_device(query: Any, key: Any, value: Any) -> None:
        if query.device.type == "neuron":
            raise ValueError(FLEX_REFUSAL)
        validate(query, key, value)

    def _convert_mask_to_block_mask(mask: Any, *args: Any, **kwargs: Any) -> Any:
        if mask.device.type == "neuron":
            raise ValueError(FLEX_REFUSAL)
        return to_blocks(mask, *args, **kwargs)

    _validate_device._trn_notebook = True  # type: ignore[attr-defined]
    flex._validate_device = _validate_device
    flex._convert_mask_to_block_mask = _convert_mask_to_block_mask
