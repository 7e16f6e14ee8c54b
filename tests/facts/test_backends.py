"""The Backend protocol: the simulator implementation agrees with the device's own records; aliases work."""

from __future__ import annotations

import sys
import warnings

import pytest
import torch

import trn_notebook
from trn_notebook import facts
from trn_notebook.device.autoload import real_backend_present
from trn_notebook.device.placement import placement_log
from trn_notebook.facts.simulator import SimulatorBackend


def test_simulator_is_the_live_backend_and_satisfies_the_protocol(fresh_device):
    backend = facts.current()
    assert isinstance(backend, SimulatorBackend) and isinstance(backend, facts.Backend)
    assert backend.is_simulator and "simulator" in facts.describe() and "neuron_sim" in facts.describe()
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
    assert trn_notebook.get_executed_ops() == {f"aten::{n}": e.calls for n, e in snap.items()}
    assert trn_notebook.get_fallback_ops() == sorted(
        f"aten::{n}" for n, e in snap.items() if e.category == "cpu_fallback"
    )
    assert "aten::linalg_qr" in trn_notebook.get_fallback_ops() and "aten::mm" in trn_notebook.get_executed_ops()
    rows = facts.current().placement()
    assert rows["aten::mm"].category == "native" and rows["aten::mm"].device_ms > 0
    before = facts.current().device_time_s()
    torch.mm(x, x).cpu()
    assert facts.current().device_time_s() > before
    trn_notebook.clear_op_tracking()
    assert trn_notebook.get_executed_ops() == {}


def test_torch_neuronx_aliases_run_on_the_simulator(fresh_device):
    assert "torch_neuronx" not in sys.modules
    module = trn_notebook.alias_torch_neuronx()
    try:
        import torch_neuronx  # type: ignore[import-not-found]

        assert torch_neuronx is module and trn_notebook.alias_torch_neuronx() is module
        assert not real_backend_present()  # the alias is not mistaken for TorchNeuron: the simulator stays live
        assert facts.current().is_simulator
        torch_neuronx.clear_op_tracking()
        torch.ones(3).to("neuron").cumsum(0).cpu()
        assert torch_neuronx.get_executed_ops() == trn_notebook.get_executed_ops() != {}
        assert torch_neuronx.get_fallback_ops() == trn_notebook.get_fallback_ops()
    finally:
        trn_notebook.remove_alias()
    assert "torch_neuronx" not in sys.modules
    with pytest.raises(ImportError):
        import torch_neuronx


class _Props:
    __slots__ = ("name", "total_memory")  # no __dict__, like a C++ properties object

    def __init__(self) -> None:
        self.name = "Trainium2"
        self.total_memory = 96 << 30


def test_torchneuron_backend_accepts_names_only_placement_and_slot_properties(monkeypatch):
    import types

    from trn_notebook import api
    from trn_notebook.facts.torchneuron import TorchNeuronBackend

    fake = types.ModuleType("torch_neuronx")
    fake.__version__ = "2.14.0"
    fake.get_executed_ops = lambda: {"aten::mm", "aten::_linalg_svd"}  # names only: counts are "not measured"
    fake.get_fallback_ops = lambda: ["aten::_linalg_svd"]
    device = types.SimpleNamespace(
        get_device_properties=lambda i: _Props(),
        get_dynamo_metrics=lambda: [{"graph_id": "g", "fx_passes_us": 5, "compile_us": 2_000_000}, {"graph_id": "h"}],
    )
    monkeypatch.setitem(sys.modules, "torch_neuronx", fake)
    monkeypatch.setattr(torch, "neuron", device)
    backend = TorchNeuronBackend()
    monkeypatch.setattr(facts, "current", lambda: backend)

    assert backend.name == "TorchNeuron (torch_neuronx 2.14.0)" and not backend.is_simulator
    assert backend.executed_ops() == {"aten::_linalg_svd": None, "aten::mm": None}
    assert api.placement_summary()["calls"] == {"native": "not measured", "cpu_fallback": "not measured"}
    assert api.placement_summary()["ops"] == {"native": 1, "cpu_fallback": 1}
    assert list(api.op_table()["calls"]) == ["not measured", "not measured"]
    assert backend.device_properties() == {"name": "Trainium2", "total_memory": 96 << 30, "simulated": False}
    assert [r.compile_s for r in backend.compile_records()] == [2.000005, None]
    assert backend.device_time_s() is None
    with pytest.raises(facts.SimulatorOnlyError, match=r"set_chip is simulator-only.*TorchNeuron"):
        api.set_chip("trn3")
