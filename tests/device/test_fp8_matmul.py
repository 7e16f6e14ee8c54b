"""FP8 matmuls are native (TorchNeuron 2.34): ``torch._scaled_mm`` on float8 runs on the device, with values equal
to CPU PyTorch's, placed ``native`` in the op table, and charged at the chip's FP8 rate (trn2: twice BF16)."""

from __future__ import annotations

import pytest
import torch

import trn_notebook
from trn_notebook.device.clocks import clocks

pytestmark = pytest.mark.usefixtures("fresh_device")


@pytest.mark.parametrize("fmt", [torch.float8_e4m3fn, torch.float8_e5m2])
def test_scaled_mm_on_float8_is_native_and_equal_to_cpu(fmt):
    torch.manual_seed(0)
    a, b = torch.randn(64, 128), torch.randn(96, 128).t()
    a8, b8 = a.to(fmt), b.to(fmt)
    sa, sb = torch.tensor(0.5), torch.tensor(2.0)
    want = torch._scaled_mm(a8, b8, sa, sb, out_dtype=torch.bfloat16)
    got = torch._scaled_mm(a8.to("neuron"), b8.to("neuron"), sa.to("neuron"), sb.to("neuron"), out_dtype=torch.bfloat16)
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)
    table = trn_notebook.op_table()
    assert table[table.op == "_scaled_mm"].category.tolist() == ["native"]


def _modeled(fn, repeat: int = 1) -> float:
    torch.neuron.synchronize()
    start = clocks.snapshot().sim_device_s
    for _ in range(repeat):
        fn()
    torch.neuron.synchronize()
    return (clocks.snapshot().sim_device_s - start) / repeat


def test_an_fp8_matmul_models_at_most_055x_the_same_bf16_matmul_on_trn2():
    n = 4096  # compute-bound: the FP8 rate, not launch or HBM, decides
    a8 = torch.empty(n, n, dtype=torch.float8_e4m3fn, device="neuron")
    b8 = torch.empty(n, n, dtype=torch.float8_e4m3fn, device="neuron").t()
    one = torch.ones((), device="neuron")
    abf = torch.empty(n, n, dtype=torch.bfloat16, device="neuron")
    bbf = torch.empty(n, n, dtype=torch.bfloat16, device="neuron").t()
    bf16 = _modeled(lambda: torch.mm(abf, bbf))
    fp8 = _modeled(lambda: torch._scaled_mm(a8, b8, one, one, out_dtype=torch.bfloat16))
    assert fp8 <= 0.55 * bf16, (fp8, bf16)


@pytest.mark.parametrize("rowwise", [False, True], ids=["tensorwise", "rowwise"])
def test_compiled_scaled_mm_is_one_native_matmul_equal_to_cpu(rowwise):
    """Compiled, ``_scaled_mm`` lowers to the IR's ``scaled_mm`` (a TensorE matmul, no host call) with float8
    operands in the graph, and gives CPU PyTorch's values, tensor-wise and row-wise scaled."""
    from trn_notebook.compiler.aten_decompositions import trace
    from trn_notebook.compiler.lower import lower
    from trn_notebook.compiler.passes import run_passes
    from trn_notebook.compiler.text import print_graph

    torch.manual_seed(0)
    a8, b8 = torch.randn(32, 64).to(torch.float8_e4m3fn), torch.randn(48, 64).to(torch.float8_e4m3fn).t()
    sa, sb = (torch.rand(32, 1) + 0.5, torch.rand(1, 48) + 0.5) if rowwise else (torch.tensor(0.5), torch.tensor(2.0))

    def f(a, b, sa, sb):
        return torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16).relu()

    want = f(a8, b8, sa, sb)
    got = torch.compile(f, backend="neuron")(*(t.to("neuron") for t in (a8, b8, sa, sb)))
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)
    graph, _ = run_passes(lower(trace(f, a8, b8, sa, sb), "scaled"))
    ops = [n.op for n in graph.nodes]
    assert "scaled_mm" in ops and "host_call" not in ops, ops
    assert "f8e4m3[" in print_graph(graph)  # the graph carries the float8 operands as they are


def test_a_compiled_fp8_matmul_models_at_most_055x_the_same_bf16_matmul_on_trn2():
    n = 4096
    a8 = torch.empty(n, n, dtype=torch.float8_e4m3fn, device="neuron")
    b8 = torch.empty(n, n, dtype=torch.float8_e4m3fn, device="neuron").t()
    one = torch.ones((), device="neuron")
    abf = torch.empty(n, n, dtype=torch.bfloat16, device="neuron")
    bbf = torch.empty(n, n, dtype=torch.bfloat16, device="neuron").t()
    fp8_fn = torch.compile(lambda a, b, s: torch._scaled_mm(a, b, s, s, out_dtype=torch.bfloat16), backend="neuron")
    bf16_fn = torch.compile(lambda a, b: torch.mm(a, b), backend="neuron")
    fp8_fn(a8, b8, one), bf16_fn(abf, bbf)  # compile first: the figures below are warm runs
    bf16 = _modeled(lambda: bf16_fn(abf, bbf))
    fp8 = _modeled(lambda: fp8_fn(a8, b8, one))
    assert fp8 <= 0.55 * bf16, (fp8, bf16)
