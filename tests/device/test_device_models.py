"""Ordinary model workflows on ``neuron`` match CPU: training loops, optimizers, autocast, save/load."""

from __future__ import annotations

import copy
import io
import threading

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

N = "neuron"


class TinyTransformer(nn.Module):
    def __init__(self, vocab: int = 50, d: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.block = nn.TransformerEncoderLayer(d, heads, dim_feedforward=64, dropout=0.0, batch_first=True)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.block(self.emb(ids))))


def _train(model: nn.Module, device: str, steps: int = 3, **opt_kwargs) -> list[float]:
    torch.manual_seed(1)
    ids = torch.randint(0, 50, (4, 12))
    model = model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, **opt_kwargs)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        logits = model(ids.to(device))
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, 50), ids[:, 1:].reshape(-1).to(device))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("opt_kwargs", [{}, {"foreach": True}, {"fused": True}], ids=["plain", "foreach", "fused"])
def test_transformer_training_loop_matches_cpu(opt_kwargs):
    torch.manual_seed(0)
    ref = TinyTransformer()
    dev = copy.deepcopy(ref)
    cpu_losses = _train(ref, "cpu", foreach=False) if not opt_kwargs else _train(ref, "cpu", **opt_kwargs)
    dev_losses = _train(dev, N, **opt_kwargs) if opt_kwargs else _train(dev, N, foreach=False)
    assert dev_losses == pytest.approx(cpu_losses, abs=1e-5)
    for (name, p_cpu), p_dev in zip(ref.named_parameters(), dev.parameters()):
        got, want = p_dev.detach().cpu(), p_cpu.detach()
        if name.endswith("in_proj_bias"):
            # The key bias has an exactly-zero true gradient (softmax ignores a constant shift), so its
            # gradient is rounding noise that Adam normalises to +-lr; compare the query and value parts.
            d = got.numel() // 3
            got, want = torch.cat([got[:d], got[2 * d :]]), torch.cat([want[:d], want[2 * d :]])
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5, msg=name)


def test_backward_runs_on_the_autograd_worker_thread_and_is_recorded(fresh_device):
    from trn_notebook.device import placement_log

    threads = set()
    x = torch.randn(3, 3, device=N, requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: threads.add(threading.current_thread().name) or g)
    y.sum().backward()
    assert torch.equal(x.grad.cpu(), torch.full((3, 3), 2.0))
    assert threads  # the hook ran in the engine; our state is process-global, so any thread is fine
    assert placement_log.snapshot()["mul"].calls >= 2  # forward mul + backward mul


def test_autocast_runs_matmul_in_bfloat16_and_softmax_in_float32():
    lin = nn.Linear(8, 8).to(N)
    x = torch.randn(4, 8).to(N)
    with torch.autocast(N, dtype=torch.bfloat16):
        y = lin(x)
        s = torch.softmax(y, -1)
    assert y.dtype == torch.bfloat16
    assert s.dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y_cpu = lin.cpu()(x.cpu())
    torch.testing.assert_close(y.cpu(), y_cpu)


def test_save_load_and_deepcopy_keep_device_and_values(tmp_path):
    model = nn.Linear(4, 3).to(N)
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    buf.seek(0)
    state = torch.load(buf, weights_only=True)
    assert state["weight"].device.type == "neuron"
    torch.testing.assert_close(state["weight"].cpu(), model.weight.cpu())
    buf.seek(0)
    on_cpu = torch.load(buf, map_location="cpu", weights_only=True)
    assert on_cpu["weight"].device.type == "cpu"
    clone = copy.deepcopy(model)
    assert clone.weight.device.type == "neuron"
    assert clone.weight.untyped_storage().data_ptr() != model.weight.untyped_storage().data_ptr()
    torch.testing.assert_close(clone.weight.cpu(), model.weight.cpu())


def test_manual_seed_makes_device_random_ops_reproducible():
    torch.manual_seed(123)
    a = torch.randn(5, device=N).cpu()
    torch.manual_seed(123)
    b = torch.randn(5, device=N).cpu()
    torch.neuron.manual_seed(123)
    c = torch.randn(5, device=N).cpu()
    assert torch.equal(a, b) and torch.equal(a, c)
    state = torch.neuron.get_rng_state()
    d = torch.rand(3, device=N).cpu()
    torch.neuron.set_rng_state(state)
    assert torch.equal(torch.rand(3, device=N).cpu(), d)


def test_dataloader_with_pin_memory_feeds_the_device():
    ds = TensorDataset(torch.arange(8, dtype=torch.float32).reshape(8, 1))
    seen = []
    for (batch,) in DataLoader(ds, batch_size=4, pin_memory=True):
        seen.append(batch.to(N).sum().item())
    assert seen == [6.0, 22.0]


def test_module_to_neuron_and_default_device(fresh_device):
    torch.set_default_device(N)
    m = nn.Linear(3, 2)
    assert m.weight.device.type == "neuron"
    torch.set_default_device("cpu")
    assert torch.ones(1).device.type == "cpu"


def test_device_module_mirrors_torchneuron():
    assert torch.neuron.is_available()
    assert torch.neuron.device_count() == 1  # one NeuronCore per process
    assert torch.neuron.get_device_properties(0).logical_cores == 4
    assert torch.neuron.current_device() == 0
    assert "Trainium2" in torch.neuron.get_device_name()
    props = torch.neuron.get_device_properties(0)
    assert props.total_memory == 24 * 2**30
    with torch.neuron.device(0):
        assert torch.neuron.current_device() == 0
    with pytest.raises(RuntimeError, match="invalid neuron device index"):
        torch.neuron.set_device(7)
    torch.neuron.synchronize()


def test_one_neuroncore_per_process_is_said_plainly():
    for make in (
        lambda: torch.ones(2, device="neuron:1"),
        lambda: torch.ones(2).to("neuron:2"),
        lambda: torch.neuron.set_device(1),
    ):
        with pytest.raises(RuntimeError, match="one NeuronCore per process.*torchrun"):
            make()
    assert torch.ones(2, device="neuron:0").device == torch.device("neuron", 0)
