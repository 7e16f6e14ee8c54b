"""Issue 27: ops with no integer datapath compute integer data in FP32 under ``trainium``, eager and compiled alike.

aws-neuron-sdk compiler/error-codes/EVRF035 (dot), EVRF060 (scatter-with-compute). The reference is CPU
PyTorch on the operands cast to float32, cast back: equal to the exact CPU result below 2^24, and off by
exactly FP32's rounding above it.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import trn_notebook

N = "neuron"
BIG = 2**24


def _mm(a: torch.Tensor, b: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    return a @ b


def _scatter_add(a: torch.Tensor, b: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    return a[0].scatter_add(0, i, b[0])


def _index_add(a: torch.Tensor, b: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    return a.index_add(0, i, b)


def _scatter_add_(a: torch.Tensor, b: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    out = a[0].clone()
    out.scatter_add_(0, i, b[0])
    return out


OPS: dict[str, Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "mm": _mm,
    "scatter_add": _scatter_add,
    "index_add": _index_add,
    "scatter_add_": _scatter_add_,
}


def _fp32_reference(fn: Callable[..., torch.Tensor], a: torch.Tensor, b: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    return fn(a.float(), b.float(), i).to(a.dtype)


def _operands(dtype: torch.dtype, big: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(27)
    a = torch.randint(-(BIG // 16), BIG // 16, (3, 3), generator=g, dtype=torch.int64).to(dtype)
    b = torch.randint(-7, 8, (3, 3), generator=g, dtype=torch.int64).to(dtype)
    if big:  # results stay inside int32 (the int64 downcast is another item)
        a[0, 0], a[1, 1], b[0, 0] = BIG + 1, 3 * BIG + 1, 1  # 2^24 + 1 and 3 * 2^24 + 1 are no FP32 values
    return a, b, torch.tensor([0, 0, 1])


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("name", list(OPS))
def test_integer_ops_without_integer_datapath_go_through_fp32_eager_and_compiled(name: str, dtype: torch.dtype) -> None:
    fn = OPS[name]
    for big in (False, True):
        a, b, i = _operands(dtype, big)
        exact = fn(a, b, i)
        reference = _fp32_reference(fn, a, b, i)
        with trn_notebook.numerics("trainium"):
            eager = fn(a.to(N), b.to(N), i.to(N)).cpu()
            compiled = torch.compile(fn, backend="neuron", fullgraph=True)(a.to(N), b.to(N), i.to(N)).cpu()
        assert eager.dtype == dtype and compiled.dtype == dtype
        assert torch.equal(eager, reference), (name, big, eager, reference)
        assert torch.equal(compiled, eager), (name, big, compiled, eager)
        if big:
            assert not torch.equal(eager, exact)  # FP32 loses the low bits above 2^24
        else:
            assert torch.equal(eager, exact)  # below 2^24 FP32 is exact
        torch._dynamo.reset()


def test_exact_mode_keeps_integer_ops_exact() -> None:
    a, b, i = _operands(torch.int32, True)
    for fn in OPS.values():
        assert torch.equal(fn(a.to(N), b.to(N), i.to(N)).cpu(), fn(a, b, i))
        assert torch.equal(torch.compile(fn, backend="neuron")(a.to(N), b.to(N), i.to(N)).cpu(), fn(a, b, i))
    torch._dynamo.reset()


def test_scatter_add_of_floats_keeps_the_elementwise_path() -> None:
    x, src, idx = torch.zeros(4), torch.randn(6), torch.tensor([0, 1, 1, 2, 3, 3])
    with trn_notebook.numerics("trainium"):
        got = x.to(N).scatter_add(0, idx.to(N), src.to(N)).cpu()
    assert torch.equal(got, x.scatter_add(0, idx, src))


def test_integer_ops_through_fp32_warn_once_per_line_as_neuronx_cc_does() -> None:
    """neuronx-cc's default posture downcasts these ops with a warning (release-notes compiler.rst L28)."""
    import inspect
    import warnings

    a, b, i = _operands(torch.int32, False)
    with trn_notebook.numerics("trainium"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 2  # type: ignore[union-attr]
        for _ in range(3):
            _ = a.to(N) @ b.to(N)  # one warning for this line
        a.to(N)[0].scatter_add(0, i.to(N), b.to(N)[0])
        _ = a.to(N).float() @ b.to(N).float()  # floats: no warning
    msgs = [w for w in caught if issubclass(w.category, trn_notebook.NeuronNumericsWarning)]
    assert [str(m.message).split(": ")[0] for m in msgs] == [
        "aten::mm on torch.int32",
        "aten::scatter_add on torch.int32",
    ]
    assert "EVRF035" in str(msgs[0].message) and "EVRF060" in str(msgs[1].message) and "2^24" in str(msgs[0].message)
    assert msgs[0].filename == __file__ and msgs[0].lineno == line
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _ = a.to(N) @ b.to(N)  # exact mode: CPU integer matmul, no warning
