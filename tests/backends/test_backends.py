"""The Backend protocol: the simulator implementation agrees with the device's own records; aliases work."""

from __future__ import annotations

import sys
import warnings

import pytest
import torch

import trn_notebook
from trn_notebook import backends
from trn_notebook.backends.simulator import SimulatorBackend
from trn_notebook.device.autoload import real_backend_present
from trn_notebook.device.placement import CALLS, CATEGORY, placement_log


def test_simulator_is_the_live_backend_and_satisfies_the_protocol(fresh_device):
    backend = backends.current()
    assert isinstance(backend, SimulatorBackend) and isinstance(backend, backends.Backend)
    assert backend.is_simulator and "simulator" in backends.describe() and "neuron_sim" in backends.describe()
    props = backend.device_properties()
    assert props["simulated"] is True and props["total_memory"] == torch.neuron.get_device_properties(0).total_memory
    assert backend.memory_stats() == torch.neuron.memory_stats()
    backend.require_simulator("anything", "nothing")  # allowed on the simulator


def test_placement_through_the_backend_matches_the_placement_log(fresh_device):
    trn_notebook.clear_op_tracking()
    x = torch.randn(4, 4).to("neuron")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.linalg.qr(x @ x)
    snap = placement_log.snapshot()
    assert trn_notebook.get_executed_ops() == {f"aten::{n}": e[CALLS] for n, e in snap.items()}
    assert trn_notebook.get_fallback_ops() == sorted(
        f"aten::{n}" for n, e in snap.items() if e[CATEGORY] == "cpu_fallback"
    )
    assert "aten::linalg_qr" in trn_notebook.get_fallback_ops() and "aten::mm" in trn_notebook.get_executed_ops()
    rows = backends.current().placement()
    assert rows["aten::mm"]["category"] == "native" and rows["aten::mm"]["device_ms"] > 0
    before = backends.current().device_time_s()
    torch.mm(x, x).cpu()
    assert backends.current().device_time_s() > before
    trn_notebook.clear_op_tracking()
    assert trn_notebook.get_executed_ops() == {}


def test_torch_neuronx_aliases_run_on_the_simulator(fresh_device):
    assert "torch_neuronx" not in sys.modules
    module = backends.alias_torch_neuronx()
    try:
        import torch_neuronx  # type: ignore[import-not-found]

        assert torch_neuronx is module and backends.alias_torch_neuronx() is module
        assert not real_backend_present()  # the alias is not mistaken for TorchNeuron: the simulator stays live
        assert backends.current().is_simulator
        torch_neuronx.clear_op_tracking()
        torch.ones(3).to("neuron").cumsum(0).cpu()
        assert torch_neuronx.get_executed_ops() == trn_notebook.get_executed_ops() != {}
        assert torch_neuronx.get_fallback_ops() == trn_notebook.get_fallback_ops()
    finally:
        backends.remove_alias()
    assert "torch_neuronx" not in sys.modules
    with pytest.raises(ImportError):
        import torch_neuronx
