"""Ops whose dry path once differed from the device's: dry and real figures are identical (the truth harness)."""

from __future__ import annotations

import torch

from .truth import real_and_dry


class _Ops(torch.nn.Module):
    """repeat (a C++ composite that builds and reads a host permutation), indexing by a CPU index tensor (beit's
    relative position bias), batch norm in eval (saved statistics empty on the device's CPU kernels) and its
    backward for an input that needs no gradient (no grad_input on the device)."""

    def __init__(self) -> None:
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(7, 4))
        self.bn = torch.nn.BatchNorm2d(4)
        self.index = torch.tensor([0, 3, 6, 2, 2, 5])  # a plain CPU tensor, as transformers' beit keeps it

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = self.table.repeat(2, 1)  # (14, 4)
        # (no gradient through the CPU-indexed table: dry, its backward takes torch's branch for tensor
        # subclasses, an out-of-place index_put, +1 clone; see DRY_DIFFERENCES)
        y = self.bn(x) + bias.sum() + self.table.detach()[self.index].sum()
        return y.sum()


def _forward(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> None:
    model.eval()
    with torch.no_grad():
        model(**inputs)


def _train(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> None:
    model.train()
    model(**inputs).backward()


def test_composites_cpu_indices_and_eval_batch_norm_dry_equal_real(fresh_device) -> None:
    model = _Ops()
    inputs = {"x": torch.randn(2, 4, 5, 5)}
    for work in (_forward, _train):
        real, dry = real_and_dry(model, inputs, work)
        assert real["ops"]["index"][1] == 1 and real["ops"]["native_batch_norm"][1] == 1
        assert dry == real, work.__name__
