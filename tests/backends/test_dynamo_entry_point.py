"""`backend="neuron"` is TorchNeuron's compiler when torch_neuronx is installed, ours otherwise; `neuron_sim` is ours."""

from __future__ import annotations

import pytest

from .fakehw import run

PROBE = """
import torch, torch._dynamo
from torch._dynamo.backends.registry import lookup_backend
import trn_notebook.compiler  # registers directly too: must not take `neuron` from the real backend
from trn_notebook.compiler.backend import neuron_backend

def f(x):
    return torch.sin(x) * 2 + 1

for backend in ("neuron", "neuron_sim"):
    torch._dynamo.reset()
    x = torch.randn(4, 3, device=DEVICE)
    out = torch.compile(f, backend=backend)(x)
    torch.testing.assert_close(out.cpu(), f(x.cpu()))
try:
    import torch_neuronx
    print("real graphs", len(torch_neuronx.compiled_graphs))
except ImportError:
    print("real graphs none")
print("sim is neuron_sim", lookup_backend("neuron_sim") is neuron_backend)
"""


@pytest.mark.slow
def test_without_torch_neuronx_neuron_is_the_simulator(tmp_path):
    out = run(
        "DEVICE = 'neuron'\n" + PROBE + "print('metrics', len(torch.neuron.get_dynamo_metrics()))", tmp_path, fake=False
    )
    assert "real graphs none" in out and "sim is neuron_sim True" in out
    assert "metrics 2" in out  # both compiles went through the simulator's compiler


@pytest.mark.slow
@pytest.mark.parametrize("fake_first", [True, False], ids=["real-entry-point-found-first", "ours-found-first"])
def test_with_torch_neuronx_neuron_is_the_real_backend(tmp_path, fake_first):
    code = (
        "DEVICE = 'cpu'\n"
        + PROBE
        + "print('neuron device owner', type(torch.neuron).__name__, torch.neuron.get_device_name())"
    )
    out = run(code, tmp_path, fake=True, fake_first=fake_first)
    assert "real graphs 1" in out  # `neuron` reached torch_neuronx's compiler whichever entry point won…
    assert "sim is neuron_sim True" in out  # …and the simulator's compiler stayed reachable by name
    assert "Trainium2 (fake)" in out  # torch.neuron stayed the real package's (ours did not replace it)
