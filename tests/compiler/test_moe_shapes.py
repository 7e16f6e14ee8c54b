"""MoE shapes as TorchNeuron 2.34 runs them: per-expert token counts changing between steps do not recompile
(they are data, the offsets of ``torch._grouped_mm``, not shapes); every other new shape still recompiles."""

from __future__ import annotations

import pytest
import torch

from trn_notebook.compiler import compile_log

pytestmark = pytest.mark.usefixtures("fresh_device")


def _moe_layer() -> tuple[object, torch.Tensor]:
    torch.manual_seed(0)
    w = torch.randn(4, 16, 32, dtype=torch.bfloat16)
    wn = w.to("neuron")

    @torch.compile(backend="neuron")
    def experts(x: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
        return torch._grouped_mm(x, wn, offs=offs).relu()

    return experts, w


def test_changing_token_counts_per_expert_do_not_recompile_and_a_new_token_total_does():
    experts, w = _moe_layer()
    x = torch.randn(64, 16, dtype=torch.bfloat16)
    before = len(compile_log.snapshot())
    for counts in ([16, 16, 16, 16], [40, 8, 8, 8], [0, 0, 32, 32], [64, 0, 0, 0]):  # one routing per step
        offs = torch.tensor(counts).cumsum(0).to(torch.int32)
        got = experts(x.to("neuron"), offs.to("neuron"))
        torch.testing.assert_close(got.cpu(), torch._grouped_mm(x, w, offs=offs).relu())
    assert len(compile_log.snapshot()) - before == 1  # four routings, one graph
    experts(torch.randn(48, 16, dtype=torch.bfloat16).to("neuron"), torch.tensor([12, 24, 36, 48]).int().to("neuron"))
    assert len(compile_log.snapshot()) - before == 2  # a new shape (48 tokens) is a new graph


def test_dynamic_true_is_still_refused():
    with pytest.raises(Exception, match="dynamic"):
        torch.compile(lambda x: x * 2, backend="neuron", dynamic=True)(torch.ones(3, device="neuron"))
