"""Differential tests: ops on ``neuron`` match CPU PyTorch (values, views, in-place writes)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import shapes, tensors

N = "neuron"


def test_factories_and_transfers_round_trip():
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    d = x.to(N)
    assert d.device.type == "neuron" and d.device.index == 0
    assert torch.equal(d.cpu(), x)
    assert torch.equal(torch.zeros(2, 3, device=N).cpu(), torch.zeros(2, 3))
    assert torch.equal(torch.full((2,), 7.0, device=N).cpu(), torch.full((2,), 7.0))
    assert torch.equal(torch.arange(5, device=N).cpu(), torch.arange(5))
    assert torch.equal(x.neuron().cpu(), x)
    assert d.is_neuron


def test_views_share_memory_and_in_place_writes_go_through():
    d = torch.zeros(4, 4, device=N)
    d[1:3, 1:3] = 5
    d.t()[0].fill_(7)
    v = d.view(16)
    v[15] = -1
    expected = torch.zeros(4, 4)
    expected[1:3, 1:3] = 5
    expected.t()[0].fill_(7)
    expected.view(16)[15] = -1
    assert torch.equal(d.cpu(), expected)
    assert d[1]._base is d


def test_item_and_print_work_and_are_sync_points(fresh_device, capsys):
    from trn_notebook.device import clocks

    d = torch.tensor([[1.5, 2.0], [3.0, 4.0]]).to(N)
    assert d[0, 0].item() == 1.5
    print(d)
    out = capsys.readouterr().out
    assert "device='neuron:0'" in out and "1.5000" in out
    reasons = [r for r, _, _ in clocks.sync_events()]
    assert ".item()" in reasons and "print / repr" in reasons


def test_mixing_devices_raises_the_usual_error():
    import pytest

    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(3, device=N) + torch.ones(3)
    # 0-dim CPU tensors are allowed, as with CUDA
    assert torch.equal((torch.ones(3, device=N) + torch.tensor(2.0)).cpu(), torch.full((3,), 3.0))


def test_float64_is_rejected_with_advice_but_printing_and_cpu_work():
    import pytest

    with pytest.raises(TypeError, match="float32 or bfloat16"):
        torch.ones(2, dtype=torch.float64).to(N)
    with pytest.raises(TypeError, match="float64"):
        torch.ones(2, device=N).double()
    d = torch.ones(2, device=N)
    assert "neuron" in repr(d)
    assert d.cpu().double().sum().item() == 2.0


def test_unsupported_op_raises_naming_op_and_way_out():
    import pytest

    import trn_notebook

    trn_notebook.set_op_category("cumprod", "unsupported", "not in this release")
    try:
        with pytest.raises(NotImplementedError, match=r"aten::cumprod.*not in this release.*cpu"):
            torch.ones(3, device=N).cumprod(0)
        # the session stays usable
        assert torch.ones(3, device=N).sum().item() == 3.0
    finally:
        trn_notebook.device.policy.clear("cumprod")


@settings(max_examples=40, deadline=None)
@given(a=tensors(), op=st.sampled_from(["add", "mul", "sub", "maximum", "neg", "abs", "relu"]))
def test_elementwise_matches_cpu(a, op):
    b = a.flip(-1)
    fn = {
        "add": lambda x, y: x + y,
        "mul": lambda x, y: x * y,
        "sub": lambda x, y: x - y,
        "maximum": torch.maximum,
        "neg": lambda x, y: -x,
        "abs": lambda x, y: x.abs(),
        "relu": lambda x, y: torch.relu(x),
    }[op]
    expected = fn(a, b)
    got = fn(a.to(N), b.to(N)).cpu()
    torch.testing.assert_close(got, expected)


@settings(max_examples=40, deadline=None)
@given(a=tensors(dtype=torch.float32), dim=st.integers(-1, 0), keepdim=st.booleans())
def test_reductions_match_cpu(a, dim, keepdim):
    d = a.to(N)
    torch.testing.assert_close(d.sum(dim, keepdim=keepdim).cpu(), a.sum(dim, keepdim=keepdim))
    torch.testing.assert_close(d.amax(dim, keepdim=keepdim).cpu(), a.amax(dim, keepdim=keepdim))
    torch.testing.assert_close(d.mean(dim, keepdim=keepdim).cpu(), a.mean(dim, keepdim=keepdim))
    torch.testing.assert_close(d.softmax(dim).cpu(), a.softmax(dim))


@settings(max_examples=30, deadline=None)
@given(m=st.integers(1, 9), k=st.integers(1, 9), n=st.integers(1, 9), transpose=st.booleans(), seed=st.integers(0, 999))
def test_matmul_matches_cpu_including_transposed_views(m, k, n, transpose, seed):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g)
    b = torch.randn(n, k, generator=g) if transpose else torch.randn(k, n, generator=g)
    rhs = b.t() if transpose else b
    got = a.to(N) @ (b.to(N).t() if transpose else b.to(N))
    torch.testing.assert_close(got.cpu(), a @ rhs)


@settings(max_examples=30, deadline=None)
@given(shape=shapes(min_dims=2, max_dims=3), seed=st.integers(0, 999))
def test_views_then_in_place_match_cpu(shape, seed):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(shape, generator=g)
    d = a.to(N)
    for t in (a, d):
        v = t.transpose(0, 1)
        v.mul_(2)
        t.select(-1, 0).add_(1)
        t.narrow(0, 0, 1).zero_()
    torch.testing.assert_close(d.cpu(), a)


def test_embedding_cross_entropy_sdpa_conv_match_cpu():
    torch.manual_seed(0)
    emb = torch.randn(10, 4)
    idx = torch.tensor([[1, 2, 9], [0, 0, 3]])
    torch.testing.assert_close(F.embedding(idx.to(N), emb.to(N)).cpu(), F.embedding(idx, emb))
    logits, tgt = torch.randn(5, 7), torch.tensor([1, 0, 6, 3, 3])
    torch.testing.assert_close(F.cross_entropy(logits.to(N), tgt.to(N)).cpu(), F.cross_entropy(logits, tgt))
    q = torch.randn(2, 4, 16, 8)
    torch.testing.assert_close(
        F.scaled_dot_product_attention(q.to(N), q.to(N), q.to(N), is_causal=True).cpu(),
        F.scaled_dot_product_attention(q, q, q, is_causal=True),
    )
    img, w = torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3)
    torch.testing.assert_close(F.conv2d(img.to(N), w.to(N), padding=1).cpu(), F.conv2d(img, w, padding=1))


def test_host_views_stay_on_cpu_under_a_neuron_default_device(fresh_device):
    from trn_notebook.device.memory.runtime import cached_host_view, host_view

    x = torch.arange(4.0).to(N)
    torch.set_default_device(N)
    try:
        assert host_view(x).device.type == "cpu" and cached_host_view(x).device.type == "cpu"
        assert torch.equal(host_view(x), torch.arange(4.0, device="cpu"))
    finally:
        torch.set_default_device("cpu")


def test_fake_neuron_tensors_print_without_touching_device_memory():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        fake = mode.from_tensor(torch.ones(2, device=N))
        text = repr(fake)
    assert "FakeTensor" in text and "neuron" in text


def test_attention_runs_the_fused_flash_kernel_forward_and_backward(fresh_device):
    from trn_notebook.device import placement_log

    q = torch.randn(2, 4, 16, 8, requires_grad=True)
    qn = q.detach().to(N).requires_grad_()
    F.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
    F.scaled_dot_product_attention(qn, qn, qn, is_causal=True).sum().backward()
    torch.testing.assert_close(qn.grad.cpu(), q.grad)
    ops = placement_log.snapshot()
    assert ops["_scaled_dot_product_flash_attention_for_cpu"].category == "native"
    assert "_scaled_dot_product_flash_attention_for_cpu_backward" in ops
    assert "bmm" not in ops  # not the math decomposition
