"""``torch.nn.attention.varlen.varlen_attn`` on neuron (native in TorchNeuron 2.34): packed sequences, forward
and backward equal to per-sequence SDPA on CPU, charged as flash attention over each sequence's own length, and
shapes-only inside a dry run. Probe (issue 56): ``NotImplementedError: aten::_flash_attention_forward has no
CPU kernel``."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention.varlen import varlen_attn

import trn_notebook
from trn_notebook.device import costmodel

pytestmark = pytest.mark.usefixtures("fresh_device")
LENS = [5, 9, 3]


def _reference(q, k, v, cu_q, cu_k, causal, groups):
    outs = []
    for i in range(len(cu_q) - 1):
        qi = q[cu_q[i] : cu_q[i + 1]].transpose(0, 1)
        ki = k[cu_k[i] : cu_k[i + 1]].transpose(0, 1).repeat_interleave(groups, 0)
        vi = v[cu_k[i] : cu_k[i + 1]].transpose(0, 1).repeat_interleave(groups, 0)
        lq, lk = qi.shape[1], ki.shape[1]
        mask = None
        if causal:  # flash attention's varlen rule: aligned to the bottom right
            mask = torch.ones(lq, lk, dtype=torch.bool).tril(lk - lq)
        outs.append(F.scaled_dot_product_attention(qi, ki, vi, attn_mask=mask).transpose(0, 1))
    return torch.cat(outs)


def _varlen(q, k, v, cu_q, cu_k, causal, gqa):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyTorch's own varlen code makes a uint64 RNG state (a CPU fallback)
        return varlen_attn(q, k, v, cu_q, cu_k, 16, 16, window_size=(-1, 0) if causal else (-1, -1), enable_gqa=gqa)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("heads", "kv_heads", "k_lens"), [(4, 4, LENS), (4, 2, LENS), (4, 4, [7, 9, 6])])
def test_varlen_forward_and_backward_equal_per_sequence_sdpa(causal, heads, kv_heads, k_lens):
    torch.manual_seed(0)
    cu_q = torch.tensor([0, *torch.tensor(LENS).cumsum(0).tolist()], dtype=torch.int32)
    cu_k = torch.tensor([0, *torch.tensor(k_lens).cumsum(0).tolist()], dtype=torch.int32)
    q = torch.randn(int(cu_q[-1]), heads, 16, requires_grad=True)
    k = torch.randn(int(cu_k[-1]), kv_heads, 16, requires_grad=True)
    v = torch.randn(int(cu_k[-1]), kv_heads, 16, requires_grad=True)
    want = _reference(q, k, v, cu_q.tolist(), cu_k.tolist(), causal, heads // kv_heads)
    grads_want = torch.autograd.grad(want.square().sum(), (q, k, v))
    qn, kn, vn = (t.detach().to("neuron").requires_grad_() for t in (q, k, v))
    got = _varlen(qn, kn, vn, cu_q.to("neuron"), cu_k.to("neuron"), causal, heads != kv_heads)
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
    grads = torch.autograd.grad(got.square().sum(), (qn, kn, vn))
    for g, w in zip(grads, grads_want, strict=True):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-4, atol=1e-4)


def _flash_device_ms() -> tuple[int, float]:
    table = trn_notebook.op_table()
    row = table[table.op == "_scaled_dot_product_flash_attention_for_cpu"]
    return int(row.calls.sum()), float(row.device_ms.sum())


def test_varlen_is_charged_over_the_real_lengths_not_the_padded_maximum():
    lens, heads, dim = [128, 1024, 64, 64], 8, 64
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device="neuron")
    packed = torch.randn(sum(lens), heads, dim, device="neuron")
    padded = torch.randn(len(lens), heads, max(lens), dim, device="neuron")
    trn_notebook.reset()
    _varlen(packed, packed, packed, cu, cu, False, False)
    calls, varlen_ms = _flash_device_ms()
    assert calls == len(lens)  # one flash call per sequence, each over its own length
    trn_notebook.reset()
    F.scaled_dot_product_attention(padded, padded, padded)
    _, padded_ms = _flash_device_ms()
    # Each sequence is its own launch here (one kernel on the hardware: n - 1 launches more); the work charged,
    # launches aside, follows the real tokens, far below the padded batch's 4 x 1024.
    launch_ms = costmodel.get_cost_constants().eager_launch_s * 1e3
    work, padded_work = varlen_ms - calls * launch_ms, padded_ms - launch_ms
    assert 0 < work < 0.4 * padded_work, (work, padded_work)


def test_varlen_inside_a_dry_run_is_shapes_only():
    with trn_notebook.dryrun():
        q = torch.empty(4096, 32, 128, device="neuron", dtype=torch.bfloat16)
        cu = torch.tensor([0, 1024, 4096], dtype=torch.int32, device="neuron")
        out = _varlen(q, q, q, cu, cu, True, False)
    assert out.shape == (4096, 32, 128)


@pytest.mark.parametrize(("heads", "kv_heads", "causal"), [(4, 4, True), (4, 2, False)])
def test_compiled_varlen_forward_and_backward_equal_per_sequence_sdpa(heads, kv_heads, causal):
    """Compiled, forward and backward: the torch_attn custom ops lower to the IR's varlen kernels (no host call)
    and give the per-sequence SDPA reference's values."""
    torch.manual_seed(0)
    cu = torch.tensor([0, *torch.tensor(LENS).cumsum(0).tolist()], dtype=torch.int32)
    q = torch.randn(int(cu[-1]), heads, 16, requires_grad=True)
    k = torch.randn(int(cu[-1]), kv_heads, 16, requires_grad=True)
    v = torch.randn(int(cu[-1]), kv_heads, 16, requires_grad=True)
    want = _reference(q, k, v, cu.tolist(), cu.tolist(), causal, heads // kv_heads)
    grads_want = torch.autograd.grad(want.square().sum(), (q, k, v))
    qn, kn, vn = (t.detach().to("neuron").requires_grad_() for t in (q, k, v))
    window, gqa = (-1, 0) if causal else (-1, -1), heads != kv_heads

    @torch.compile(backend="neuron")
    def compiled(q, k, v, cu):  # no warnings context here: dynamo would run it eagerly instead of capturing it
        return varlen_attn(q, k, v, cu, cu, 16, 16, window_size=window, enable_gqa=gqa)

    got = compiled(qn, kn, vn, cu.to("neuron"))
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
    grads = torch.autograd.grad(got.square().sum(), (qn, kn, vn))
    for g, w in zip(grads, grads_want, strict=True):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-4, atol=1e-4)
    table = trn_notebook.op_table()
    graphs = table[table.op.str.startswith("graph:")]
    assert sorted(graphs.op.str.rsplit("_", n=2).str[1]) == ["backward", "forward"], graphs.op.tolist()
    assert not table.op.isin(["_flash_attention_forward", "_flash_attention_backward"]).any()  # inside the graphs


def test_compiled_varlen_is_one_library_kernel_priced_over_equal_lengths():
    """The IR holds one ``varlen_attn`` node; its FLOPs are flash attention over n equal-length sequences (the
    compiled schedule is static: the assumption is stated in compiler/varlen.py), not the padded maximum."""
    from trn_notebook.compiler.aten_decompositions import trace
    from trn_notebook.compiler.lower import lower
    from trn_notebook.compiler.passes import run_passes
    from trn_notebook.compiler.schedule import node_flops

    total, heads, dim, n = 48, 4, 16, 3
    q, k, v = (torch.randn(total, heads, dim) for _ in range(3))
    cu = torch.tensor([0, 16, 32, 48], dtype=torch.int32)
    graph, _ = run_passes(lower(trace(lambda q, k, v, cu: varlen_attn(q, k, v, cu, cu, 16, 16), q, k, v, cu), "v"))
    nodes = [node for node in graph.nodes if node.op == "varlen_attn"]
    assert len(nodes) == 1 and not [node for node in graph.nodes if node.op == "host_call"]
    equal_lengths = n * 4.0 * (total // n) * (total // n) * heads * dim  # the exact figure when lengths are equal
    assert node_flops(nodes[0], graph.types()) == equal_lengths
