"""Losses on neuron print no PyTorch deprecation warnings the CPU does not print (issue 28, item 6)."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.usefixtures("fresh_device")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_on_neuron_equals_cpu_without_the_resize_warning(reduction):
    """The composite kernel's mse_loss.out detour (a 0-dim out resized) is skipped by a direct kernel."""
    torch.manual_seed(0)
    a, b = torch.randn(20, 5, requires_grad=True), torch.randn(20, 5)
    want = F.mse_loss(a, b, reduction=reduction)
    want.sum().backward()
    x = a.detach().to("neuron").requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "An output with one or more elements was resized ..." would raise
        got = F.mse_loss(x, b.to("neuron"), reduction=reduction)
        got.sum().backward()
    assert got.device.type == "neuron" and got.shape == want.shape
    assert torch.equal(got.detach().cpu(), want.detach())
    assert torch.equal(x.grad.cpu(), a.grad)
