"""The trainium numerics policy per op class, each against a hand-computed reference (CPU PyTorch)."""

from __future__ import annotations

import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import trn_notebook
from trn_notebook.device.numerics.calls import classify, round_stochastic, round_tf32
from trn_notebook.device.numerics.policy import NeuronNumericsWarning
from trn_notebook.device.ops.policy import policy as registry

N = "neuron"


def _bf16_sequential(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A pure-BF16 accumulation: every partial sum rounded to bf16 (what FP32 PSUM avoids)."""
    acc = torch.zeros(a.shape[0], b.shape[1], dtype=torch.bfloat16)
    for k in range(a.shape[1]):
        acc = (acc.float() + (a[:, k : k + 1].float() * b[k : k + 1, :].float()).bfloat16().float()).bfloat16()
    return acc


def test_bf16_matmul_accumulates_in_fp32_and_rounds_once() -> None:
    g = torch.Generator().manual_seed(1)
    a = torch.randn(8, 512, generator=g).bfloat16()
    b = torch.randn(512, 8, generator=g).bfloat16()
    reference = (a.double() @ b.double()).float().bfloat16()  # exact products, FP32 sum, one RNE rounding
    fp32_acc = (a.float() @ b.float()).bfloat16()
    with trn_notebook.numerics("trainium"):
        got = (a.to(N) @ b.to(N)).cpu()
    assert got.dtype == torch.bfloat16
    assert torch.equal(got, fp32_acc)
    assert (got.float() - reference.float()).abs().max() <= reference.float().abs().max() * 2**-7
    pure = _bf16_sequential(a, b)
    err_fp32 = (got.double() - a.double() @ b.double()).abs().mean()
    err_bf16 = (pure.double() - a.double() @ b.double()).abs().mean()
    assert err_bf16 > 2 * err_fp32  # bf16 accumulation over K=512 loses far more


def test_autocast_matmult_rounds_fp32_operands_to_bf16() -> None:
    g = torch.Generator().manual_seed(2)
    a, b, bias = torch.randn(4, 64, generator=g), torch.randn(64, 3, generator=g), torch.randn(3, generator=g)
    with trn_notebook.numerics("trainium", autocast="matmult"):
        got = torch.addmm(bias.to(N), a.to(N), b.to(N)).cpu()
    expected = torch.addmm(bias, a.bfloat16().float(), b.bfloat16().float())  # bias is not a TensorE operand
    assert got.dtype == torch.float32
    assert torch.equal(got, expected)
    assert not torch.equal(got, torch.addmm(bias, a, b))


def test_autocast_tf32_keeps_ten_mantissa_bits() -> None:
    x = torch.tensor([1 + 2**-11, 1 + 3 * 2**-11, 1 + 2**-10 + 2**-12, -(1 + 2**-11)])
    assert round_tf32(x).tolist() == [1.0, 1 + 2**-9, 1 + 2**-10, -1.0]  # RNE: ties to even


def test_integer_matmul_goes_through_fp32() -> None:
    a = torch.tensor([[2**24 + 1, 1]], dtype=torch.int32)
    b = torch.tensor([[1], [0]], dtype=torch.int32)
    with trn_notebook.numerics("trainium"):
        got = (a.to(N) @ b.to(N)).cpu()
    assert got.item() == 2**24  # 2^24 + 1 is not an FP32 value
    assert (a @ b).item() == 2**24 + 1  # exact mode: CPU integer matmul
    assert (a.to(N) @ b.to(N)).cpu().item() == 2**24 + 1


def test_int64_downcast_wraps_and_can_be_turned_off() -> None:
    x = torch.tensor([2**31 - 1, -(2**31), 5], dtype=torch.int64)
    with trn_notebook.numerics("trainium"):
        got = (x.to(N) + 1).cpu()
        summed = x.to(N)[:1].repeat(3).sum().cpu()
    assert got.tolist() == [-(2**31), -(2**31) + 1, 6]  # int32 two's complement wrap
    assert summed.item() == torch.tensor(3 * (2**31 - 1)).to(torch.int32).item()
    with trn_notebook.numerics("trainium", downcast_int64=False):
        assert (x.to(N) + 1).cpu().tolist() == [2**31, -(2**31) + 1, 6]


def test_stochastic_rounding_is_unbiased_and_seeded() -> None:
    value = 1 + 2**-9  # a quarter of the way between bf16 neighbours 1 and 1 + 2^-7
    x = torch.full((20000,), value)
    with trn_notebook.numerics("trainium", stochastic_rounding=True, seed=5):
        first = (x.to(N) * 1.0).bfloat16().cpu()
    assert set(first.float().unique().tolist()) == {1.0, 1 + 2**-7}
    mean = first.double().mean().item()
    assert abs(mean - value) < 4 * (2**-7 * 0.433 / 20000**0.5)  # unbiased within 4 sigma
    assert x.bfloat16().double().mean().item() == 1.0  # RNE: always down, biased by 2^-9
    with trn_notebook.numerics("trainium", stochastic_rounding=True, seed=5):
        again = (x.to(N) * 1.0).bfloat16().cpu()
    assert torch.equal(first, again)  # the seed decides


@settings(max_examples=40, deadline=None)
@given(st.floats(min_value=-1e4, max_value=1e4, allow_nan=False, width=32))
def test_stochastic_rounding_lands_on_a_neighbour(v: float) -> None:
    x = torch.full((64,), v)
    out = round_stochastic(x, torch.bfloat16, torch.Generator().manual_seed(0)).float()
    bits = x[:1].view(torch.int32)
    toward_zero = (bits & -65536).view(torch.float32).item()  # bf16 keeps the top 16 bits
    away = ((bits & -65536) + 65536).view(torch.float32).item()
    allowed = {toward_zero} if toward_zero == x[0].item() else {toward_zero, away}
    assert set(out.tolist()) <= allowed


def test_stochastic_rounding_in_place_op_writes_the_callers_tensor() -> None:
    p = torch.ones(4096, dtype=torch.bfloat16).to(N)
    with trn_notebook.numerics("trainium", stochastic_rounding=True, seed=1):
        p.add_(2**-9)  # RNE would leave every element at 1.0
    values = p.cpu().float()
    assert 0.1 < (values > 1).float().mean().item() < 0.4


def test_out_of_range_rsqrt_warns_with_source_line() -> None:
    x = torch.tensor([0.0, 1.0, 4.0]).to(N)
    with trn_notebook.numerics("trainium"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = __import__("inspect").currentframe().f_lineno + 1  # type: ignore[union-attr]
        y = torch.rsqrt(x)
        torch.rsqrt(x)  # another line: warned again; the same line is warned once
    msgs = [w for w in caught if issubclass(w.category, NeuronNumericsWarning)]
    assert len(msgs) == 2
    assert "aten::rsqrt" in str(msgs[0].message) and "[2^-87, 2^97]" in str(msgs[0].message)
    assert msgs[0].filename == __file__ and msgs[0].lineno == line
    assert torch.equal(y.cpu(), torch.rsqrt(x.cpu()))  # the CPU value is kept (the invalid value is unpublished)


def test_log_in_range_does_not_warn_and_exact_mode_never_warns() -> None:
    x = torch.tensor([1e-3, 1.0, 1e3]).to(N)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with trn_notebook.numerics("trainium"):
            torch.log(x)
        torch.log(torch.zeros(2).to(N))


def test_numerics_classes_come_from_the_registry() -> None:
    aten = torch.ops.aten
    assert classify(aten.mm.default)[0] == "matmul"
    assert classify(aten.convolution.default)[0] == "matmul"
    assert classify(aten.rsqrt.default)[0] == "activation"
    assert classify(aten.exp.default)[0] == "elementwise"
    assert classify(aten.sum.dim_IntList)[0] == "reduction"
    assert classify(aten.bitwise_and.Tensor)[0] == "integer"
    assert classify(aten.view.default)[0] == "movement"
    assert registry.rule("rsqrt").valid_range is not None


def test_exact_mode_is_bit_equal_to_cpu() -> None:
    g = torch.Generator().manual_seed(3)
    a = torch.randn(8, 64, generator=g).bfloat16()
    b = torch.randn(64, 8, generator=g).bfloat16()
    assert trn_notebook.numerics_policy().mode == "exact"
    assert torch.equal((a.to(N) @ b.to(N)).cpu(), a @ b)
    assert torch.equal(torch.softmax(a.to(N), -1).cpu(), torch.softmax(a, -1))


@pytest.mark.parametrize("autocast", ["none", "matmult", "all"])
def test_small_mlp_eager_equals_compiled(autocast: str) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    x = torch.randn(8, 16)
    cpu = model(x)
    model = model.to(N)
    with trn_notebook.numerics("trainium", autocast=autocast):
        eager = model(x.to(N)).cpu()
        compiled = torch.compile(model, backend="neuron")(x.to(N)).cpu()
    assert torch.equal(eager, compiled)
    if autocast == "none":
        assert torch.equal(eager, cpu)  # fp32 stays fp32 (Neuron >= 2.27's default)
    else:
        assert 1e-4 < (eager - cpu).abs().max().item() < 0.1


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 6), st.integers(1, 300), st.integers(1, 6), st.integers(0, 2**16))
def test_bf16_mm_is_fp32_accumulation_rounded_once(m: int, k: int, n: int, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(m, k, generator=g).bfloat16(), torch.randn(k, n, generator=g).bfloat16()
    with trn_notebook.numerics("trainium"):
        got = torch.mm(a.to(N), b.to(N)).cpu()
    assert torch.equal(got, (a.float() @ b.float()).bfloat16())


def test_compiled_stochastic_rounding_is_unbiased() -> None:
    x = torch.ones(8192, dtype=torch.bfloat16)

    def f(t: torch.Tensor) -> torch.Tensor:
        return t + 2**-9  # FP32 math: 1 + 2^-9, a quarter of the way from bf16 1.0 to 1 + 2^-7

    with trn_notebook.numerics("trainium", stochastic_rounding=True, seed=4):
        out = torch.compile(f, backend="neuron")(x.to(N)).cpu().float()
    assert set(out.unique().tolist()) == {1.0, 1 + 2**-7}
    assert abs(out.double().mean().item() - (1 + 2**-9)) < 4 * 2**-7 * 0.433 / 8192**0.5


def test_cpu_fallback_ops_keep_cpu_numerics() -> None:
    assert classify(torch.ops.aten.linalg_qr.default)[0] == "host"  # the host CPU computes it on hardware too


def test_stochastic_rounding_keeps_the_update_of_an_in_place_foreach_op(fresh_device):
    """``_foreach_add_`` returns nothing: its FP32 results must be rounded back into the caller's tensors."""
    with trn_notebook.numerics("trainium", stochastic_rounding=True, seed=3):
        xs = [torch.ones(4096, dtype=torch.bfloat16, device="neuron") for _ in range(2)]
        torch._foreach_add_(xs, [torch.full((4096,), 1e-3, dtype=torch.bfloat16, device="neuron")] * 2)
        moved = [float((x.cpu().float() != 1.0).float().mean()) for x in xs]
    # 1 + 1e-3 lies between the bf16 neighbours 1 and 1 + 2^-7: SR moves about 1e-3 / 2^-7 = 12.8% up
    assert all(0.08 < m < 0.18 for m in moved), moved
