"""Tied weights survive every module conversion involving ``neuron`` exactly as on CPU."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
from torch import nn


class Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(11, 6)
        self.body = nn.Sequential(nn.Linear(6, 6), nn.GELU(), nn.LayerNorm(6))
        self.head = nn.Linear(6, 11, bias=False)
        self.head.weight = self.emb.weight
        self.register_buffer("scale", torch.tensor(0.5))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(self.emb(ids)) * self.scale)


def _model() -> Tied:
    torch.manual_seed(0)
    return Tied()


def _facts(m: nn.Module) -> tuple[bool, int, int]:
    return (m.head.weight is m.emb.weight, len(list(m.parameters())), len(m.state_dict()))


def _train(m: nn.Module, device: str, opt_before_move: bool) -> tuple[list[float], dict[str, torch.Tensor]]:
    ids = torch.tensor([[1, 4, 2, 9], [3, 3, 7, 0]])
    if opt_before_move:
        opt = torch.optim.AdamW(m.parameters(), lr=0.05)
        m.to(device)
    else:
        m.to(device)
        opt = torch.optim.AdamW(m.parameters(), lr=0.05)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(m(ids.to(device)).flatten(0, 1), ids.flatten().to(device))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {k: v.detach().cpu() for k, v in m.state_dict().items()}


def test_to_neuron_keeps_ties_identity_and_count(fresh_device):
    m = _model()
    before = {id(p) for p in m.parameters()}
    facts_cpu = _facts(m)
    m.to("neuron")
    assert _facts(m) == facts_cpu == (True, 5, 7)
    assert {id(p) for p in m.parameters()} == before  # same objects, as .to("cuda") keeps them
    assert m.head.weight.device.type == "neuron" and m.scale.device.type == "neuron"
    m.to(torch.bfloat16)
    assert _facts(m) == facts_cpu and m.emb.weight.dtype == torch.bfloat16
    m.cpu()
    assert _facts(m) == facts_cpu and {id(p) for p in m.parameters()} == before
    assert m.emb.weight.device.type == "cpu"


@pytest.mark.parametrize("opt_before_move", [False, True])
def test_training_tied_model_matches_cpu(fresh_device, opt_before_move):
    ref_losses, ref_state = _train(_model(), "cpu", opt_before_move)
    losses, state = _train(_model(), "neuron", opt_before_move)
    assert losses == pytest.approx(ref_losses, rel=1e-5, abs=1e-6)
    for k in ref_state:
        torch.testing.assert_close(state[k], ref_state[k], rtol=1e-5, atol=1e-6, msg=k)


def test_grads_move_with_parameters(fresh_device):
    m = _model()
    m(torch.tensor([[1, 2]])).sum().backward()
    g = m.emb.weight.grad.clone()
    m.to("neuron")
    assert m.head.weight.grad is m.emb.weight.grad
    assert m.emb.weight.grad.device.type == "neuron"
    torch.testing.assert_close(m.emb.weight.grad.cpu(), g)


def test_deepcopy_load_state_dict_apply_to_empty_match_cpu(fresh_device):
    for device in ("cpu", "neuron"):
        m = _model().to(device)
        assert _facts(copy.deepcopy(m)) == _facts(m), device
        other = _model().to(device)
        other.load_state_dict(_model().state_dict())
        assert _facts(other)[0], device
        m.apply(lambda mod: nn.init.zeros_(mod.weight) if isinstance(mod, nn.Linear) else None)
        assert _facts(m)[0] and float(m.emb.weight.detach().abs().sum()) == 0.0
        assigned = _model().to(device)
        assigned.load_state_dict(_model().to(device).state_dict(), assign=True)
        with torch.device("meta"):
            meta = Tied()
        meta.to_empty(device=device)
        # These two untie on CPU too (new Parameters by design); the device must not differ.
        assert (_facts(assigned), _facts(meta)) == ((False, 6, 7), (False, 6, 7)), device


def test_conversion_not_touching_neuron_is_unchanged():
    m = _model()
    before = list(m.parameters())  # kept alive: a freed Parameter's id() may be reused by a new one
    ids = {id(p) for p in before}
    m.double()
    assert _facts(m)[0] and {id(p) for p in m.parameters()} == ids
    torch.__future__.set_overwrite_module_params_on_conversion(True)
    try:
        m.float()  # PyTorch makes new Parameters here on CPU (untying); so must the device path
        assert {id(p) for p in m.parameters()}.isdisjoint(ids)
    finally:
        torch.__future__.set_overwrite_module_params_on_conversion(False)


def test_swap_impossible_keeps_tie_and_warns(fresh_device):
    import weakref

    m = _model()
    _ref = weakref.ref(m.emb.weight)  # swap_tensors refuses tensors with weakrefs (dynamo guards hold some)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import trn_notebook.device.tying as tying

        tying._local.warned = False
        m.to("neuron")
    assert m.head.weight is m.emb.weight and m.emb.weight.device.type == "neuron"
    assert len(list(m.parameters())) == 5
    assert any("could not keep Parameter" in str(w.message) for w in caught)


def test_a_conversion_holds_no_tensor_after_it_returns(fresh_device):
    """The tie memo lives for one outermost ``.to`` only: a device tensor it kept would be freed (a real free)
    by whatever conversion comes next — inside a dry run, that moved the real figures (issue 48)."""
    import weakref

    import trn_notebook.device.tying as tying

    m = _model()
    _ref = weakref.ref(m.emb.weight)  # forces the memo path (swap refused)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.to("neuron")
    assert tying._local.memo == {}
    del m
    assert _ref() is None  # nothing of the model outlives it
