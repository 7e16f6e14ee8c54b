"""Ops whose dry path once differed from the device's: dry and real figures are identical (the truth harness)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from .truth import real_and_dry

# As in test_truth.py: the real run's allocator figures count every live device tensor, and earlier tests of a
# session leave some (dynamo keeps example values of failed compiles), so the comparisons run in a fresh process.
ISOLATED = os.environ.get("TRN_TRUTH_ISOLATED") == "1"
in_fresh_process = pytest.mark.skipif(
    not ISOLATED, reason="runs in the fresh process of test_dry_ops_in_a_fresh_process"
)


@pytest.mark.skipif(ISOLATED, reason="the outer run")
def test_dry_ops_in_a_fresh_process() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__],
        env={**os.environ, "TRN_TRUTH_ISOLATED": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "3 passed" in proc.stdout, proc.stdout[-2000:]


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


@in_fresh_process
def test_composites_cpu_indices_and_eval_batch_norm_dry_equal_real(fresh_device) -> None:
    model = _Ops()
    inputs = {"x": torch.randn(2, 4, 5, 5)}
    for work in (_forward, _train):
        real, dry = real_and_dry(model, inputs, work)
        assert real["ops"]["index"][1] == 1 and real["ops"]["native_batch_norm"][1] == 1
        assert dry == real, work.__name__


class _Experts(torch.nn.Module):
    """MoE experts as transformers runs them: one ``_grouped_mm`` over tokens sorted by expert."""

    def __init__(self, n: int = 4) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3, 8, n))
        self.offs = torch.tensor([4, 9, 12], dtype=torch.int32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch._grouped_mm(x, self.w, offs=self.offs.to(x.device)).pow(2).sum()


@in_fresh_process
def test_grouped_mm_is_one_native_kernel_charged_from_its_shapes(fresh_device) -> None:
    import trn_notebook
    from trn_notebook.device.dry.host_shapes import GROUPED_MM_ASSUMED

    model, x = _Experts(), torch.randn(12, 8)
    with torch.no_grad():
        want = model(x)
        got = model.to("neuron")(x.to("neuron")).cpu()
    model.to("cpu")
    torch.testing.assert_close(got, want)
    real, dry = real_and_dry(model, {"x": x}, _train)
    assert real["ops"]["_grouped_mm"][:2] == ("native", 2)  # forward and the weight gradient
    assert dry == real  # the real offsets split 4/5/3, the dry run knows none: same charge
    with trn_notebook.dryrun() as run:
        _Experts().to("neuron")(torch.randn(12, 8, device="neuron"))
    assert run.assumptions and run.assumptions[0].startswith(GROUPED_MM_ASSUMED)
    assert "balanced routing, assumed" in run.summary()


@in_fresh_process
def test_compiled_grouped_mm_lowers_and_states_its_assumption(fresh_compiler) -> None:
    import trn_notebook
    from trn_notebook.device.dry.host_shapes import GROUPED_MM_ASSUMED

    # bf16 (torch's meta kernel, which dynamo traces with, takes only bf16) and 16-byte-aligned rows (n = 8)
    model, x = _Experts(8).to(torch.bfloat16), torch.randn(12, 8, dtype=torch.bfloat16)
    with torch.no_grad():
        want = model(x)
        got = torch.compile(model.to("neuron"), backend="neuron")(x.to("neuron")).cpu()
    torch.testing.assert_close(got, want)  # one graph with the grouped matmul lowered (no eager fallback)
    torch._dynamo.reset()
    with trn_notebook.dryrun() as run, torch.no_grad():
        m = _Experts(8).to(torch.bfloat16).to("neuron")
        torch.compile(m, backend="neuron")(torch.randn(12, 8, dtype=torch.bfloat16, device="neuron"))
    ops = run.figures.placement
    assert any(op.startswith("graph:") for op in ops) and "_grouped_mm" not in ops, list(ops)
    assert run.assumptions and run.assumptions[0].startswith(GROUPED_MM_ASSUMED)
