"""`backend="neuron"` is TorchNeuron's compiler when torch_neuronx is installed, ours otherwise; `neuron_sim` is ours.

The fake-first direction is covered by test_fake_hardware.py (same subprocess as the api/report checks).
"""

from __future__ import annotations

import pytest
import torch

from .fakehw import run


def test_without_torch_neuronx_neuron_and_neuron_sim_are_the_simulators_compiler(fresh_compiler):
    from torch._dynamo.backends.registry import lookup_backend

    from trn_notebook.compiler import compile_log
    from trn_notebook.compiler.backend import neuron_backend
    from trn_notebook.facts import dynamo

    assert dynamo.real_dynamo_backend() is None and dynamo.live_compiler() == "trn_notebook simulator"
    assert lookup_backend("neuron_sim") is neuron_backend
    assert lookup_backend("neuron") in (neuron_backend, dynamo.neuron_entry_point)

    def f(x):
        return torch.sin(x) * 2 + 1

    x = torch.randn(4, 3)
    before = len(compile_log.snapshot())
    for fn in (dynamo.neuron_entry_point, "neuron", "neuron_sim"):
        torch._dynamo.reset()
        out = torch.compile(f, backend=fn)(x.to("neuron"))
        torch.testing.assert_close(out.cpu(), f(x))
    assert len(compile_log.snapshot()) - before == 3  # every name went through the simulator's compiler


PROBE = """
import torch, torch._dynamo
from torch._dynamo.backends.registry import lookup_backend
import trn_notebook.compiler  # registers directly too: must not take `neuron` from the real backend
from trn_notebook.compiler.backend import neuron_backend
import torch_neuronx

out = torch.compile(lambda x: torch.sin(x) * 2 + 1, backend="neuron")(torch.randn(4, 3))
print("real graphs", len(torch_neuronx.compiled_graphs))
print("sim is neuron_sim", lookup_backend("neuron_sim") is neuron_backend)
print("device module", torch.neuron.get_device_name())
"""


@pytest.mark.slow
def test_with_torch_neuronx_found_after_ours_neuron_is_still_the_real_backend(tmp_path):
    out = run(PROBE, tmp_path, fake=True, fake_first=False)
    assert "real graphs 1" in out  # our `neuron` entry point won the lookup and handed the graph over
    assert "sim is neuron_sim True" in out  # the simulator's compiler stayed reachable by name
    assert "Trainium2 (fake)" in out  # torch.neuron stayed the real package's (ours did not replace it)


def test_torch_neuronx_without_a_neuron_entry_point_is_a_loud_error_not_the_simulator(monkeypatch):
    import importlib.metadata
    import types

    from trn_notebook.facts import dynamo

    ours = types.SimpleNamespace(dist=types.SimpleNamespace(metadata={"Name": "trn_notebook"}), load=lambda: None)
    monkeypatch.setattr(dynamo, "real_backend_present", lambda: True)
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group, name: [ours])
    with pytest.raises(dynamo.RealBackendMissingError, match="backend='neuron_sim'"):
        dynamo.neuron_entry_point(None, [])
    assert dynamo.live_compiler() == "torch_neuronx"
