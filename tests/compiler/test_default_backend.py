"""``torch.compile(model)`` with the default backend (Inductor) on neuron, and FlexAttention on neuron.

Contract (README, "Contracts"): a default-backend graph that touches neuron is compiled by the neuron
compiler, exactly as ``backend="neuron"``, with one note per process naming ``backend="neuron"``;
graphs on other devices keep Inductor. ``flex_attention`` / ``create_block_mask`` on neuron are refused
at the call, eager or compiled, with a message naming SDPA.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention.flex_attention import create_block_mask, create_mask, flex_attention

from trn_notebook.compiler import compile_log
from trn_notebook.facts import dynamo as routing

pytestmark = pytest.mark.usefixtures("fresh_compiler")


class TinyGPT(nn.Module):
    """nanoGPT's model in miniature: tied embeddings, causal SDPA, GELU MLP, cross-entropy on int64 targets."""

    def __init__(self, vocab: int = 64, dim: int = 32, heads: int = 4, block: int = 16) -> None:
        super().__init__()
        self.heads = heads
        self.wte, self.wpe = nn.Embedding(vocab, dim), nn.Embedding(block, dim)
        self.ln_1, self.ln_2, self.ln_f = nn.LayerNorm(dim), nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.c_attn, self.c_proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.c_fc, self.mlp_proj = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.wte.weight = self.lm_head.weight

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        b, t = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(t, device=idx.device))
        q, k, v = self.c_attn(self.ln_1(x)).split(x.size(-1), dim=2)
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).contiguous().view(b, t, -1)
        x = x + self.c_proj(y)
        x = x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


@pytest.mark.slow  # the first compile of a process imports dynamo and AOT Autograd (~10 s loaded)
def test_default_torch_compile_on_neuron_runs_our_compiler_and_equals_cpu(monkeypatch):
    monkeypatch.setattr(routing, "_noted", [False])
    torch.manual_seed(0)
    ref = TinyGPT()
    model = TinyGPT().to("neuron")
    model.load_state_dict(ref.state_dict())
    idx, targets = torch.randint(0, 64, (2, 8)), torch.randint(0, 64, (2, 8))
    want = ref(idx, targets)
    want.backward()
    compiled = torch.compile(model)  # nanoGPT's train.py: compile=True, no backend
    with pytest.warns(routing.DefaultBackendNote, match=r"backend='neuron'") as notes:
        got = compiled(idx.to("neuron"), targets.to("neuron"))
    assert notes[0].filename == __file__  # the note points at the user's call, not at torch's frames
    got.backward()
    assert got.device.type == "neuron"
    torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=1e-5, atol=1e-6)
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-4, atol=1e-5)
    assert {r.kind for r in compile_log.snapshot()} >= {"forward", "backward"}  # the neuron compiler ran
    with warnings.catch_warnings():
        warnings.simplefilter("error", routing.DefaultBackendNote)  # once per process
        torch.compile(lambda x: x * 2)(torch.ones(3, device="neuron"))


def test_only_graphs_that_touch_neuron_are_routed():
    gms: list[torch.fx.GraphModule] = []

    def capture(gm: torch.fx.GraphModule, inputs: list[torch.Tensor]) -> object:
        gms.append(gm)
        return gm.forward

    def f(x: torch.Tensor) -> torch.Tensor:
        return x.sin() + torch.ones(3, device=x.device)

    for device in ("cpu", "neuron"):
        torch.compile(f, backend=capture)(torch.ones(3, device=device))
    inputs = [[torch.ones(3)], [torch.ones(3, device="neuron")]]
    assert [routing._touches_neuron(gm, x) for gm, x in zip(gms, inputs)] == [False, True]
    # a graph with no tensor input that builds its tensors on neuron is routed too
    gms.clear()
    torch.compile(lambda: torch.ones(2, device="neuron") * 3, backend=capture)()
    assert routing._touches_neuron(gms[0], [])


def _qkv(device: str, grad: bool) -> list[torch.Tensor]:
    torch.manual_seed(0)
    return [torch.randn(1, 2, 16, 8).to(device).requires_grad_(grad) for _ in range(3)]


def _relative(score, b, h, q_idx, kv_idx):
    return score + (q_idx - kv_idx) * 0.1


def _causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


@pytest.mark.parametrize("how", ["eager", "default compile", "backend neuron"])
def test_flex_attention_on_neuron_is_refused_at_the_call_naming_sdpa(how):
    q, k, v = _qkv("neuron", grad=True)
    call = {
        "eager": flex_attention,
        "default compile": torch.compile(flex_attention),
        "backend neuron": torch.compile(flex_attention, backend="neuron"),
    }[how]
    with pytest.raises(ValueError, match=r"flex_attention does not run on the neuron device.*scaled_dot_product"):
        call(q, k, v, score_mod=_relative)
    with pytest.raises(ValueError, match="attn_implementation='sdpa'"):
        create_block_mask(_causal, 1, 1, 16, 16, device="neuron")


def test_flex_attention_elsewhere_and_dense_masks_on_neuron_are_unchanged():
    q, k, v = _qkv("cpu", grad=False)
    scores = q @ k.transpose(-1, -2) / math.sqrt(8)
    i = torch.arange(16)
    want = (scores + (i[:, None] - i[None, :]) * 0.1).softmax(-1) @ v
    torch.testing.assert_close(flex_attention(q, k, v, score_mod=_relative), want, rtol=1e-5, atol=1e-5)
    mask = create_mask(_causal, 1, 1, 16, 16, device="neuron")  # a dense mask also serves SDPA: allowed
    assert mask.device.type == "neuron" and torch.equal(mask.cpu(), create_mask(_causal, 1, 1, 16, 16, "cpu"))


def test_the_int64_downcast_note_does_not_advise_32_bit_token_ids():
    from trn_notebook.compiler.backend import _downcast_advice

    ints = _downcast_advice("idx:i64,targets:i64")
    assert "keep them int64" in ints and "cross_entropy" in ints and "pass float32" not in ints
    assert "pass 32-bit" not in ints  # cross_entropy refuses int32 targets: that advice would break the model
    floats = _downcast_advice("x:f64")
    assert "float32 precision" in floats and "int64" not in floats
    assert "float32 precision" in _downcast_advice("x:f64,idx:i64") and "keep them int64" in _downcast_advice(
        "x:f64,idx:i64"
    )
