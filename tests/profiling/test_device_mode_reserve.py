"""The profiler's ``ProfileMode.DEVICE`` holds HBM for its hardware-notification buffers (TorchNeuron 2.34: "about
5 GB of HBM on Trn2"): while a DEVICE-mode profile is open, tensors have that much less capacity; other modes hold
nothing; a chip with no published figure reserves nothing and says so; ``plan(profile=True)`` plans with it."""

from __future__ import annotations

import pytest
import torch

import trn_notebook
from trn_notebook.device.chips import get_chip_spec
from trn_notebook.profiling import NeuronConfig, ProfileMode

pytestmark = pytest.mark.usefixtures("fresh_device")


def _total() -> int:
    return torch.accelerator.get_memory_info()[1]  # (free, total) of the current device, routed to ours


def test_a_device_mode_profile_holds_5_gb_of_hbm_while_it_runs_on_trn2():
    before = _total()
    with trn_notebook.profile(config=NeuronConfig(modes=(ProfileMode.DEVICE, ProfileMode.RUNTIME))) as run:
        during = _total()
        torch.ones(4, device="neuron").sum()
    assert before - during == 5_000_000_000 == run.hbm_reserved
    assert _total() == before  # given back when the block ends


def test_runtime_and_host_memory_modes_hold_nothing():
    before = _total()
    with trn_notebook.profile(config=NeuronConfig(modes=(ProfileMode.RUNTIME, ProfileMode.HOST_MEMORY))) as run:
        assert _total() == before
        torch.ones(4, device="neuron").sum()
    assert run.hbm_reserved is None


def test_a_chip_without_a_published_figure_reserves_nothing():
    chip = trn_notebook.get_chip().name
    trn_notebook.set_chip("trn3")
    try:
        before = _total()
        with trn_notebook.profile() as run:
            assert _total() == before
            torch.ones(4, device="neuron").sum()
    finally:
        trn_notebook.set_chip(chip)
    assert run.hbm_reserved is None and get_chip_spec("trn3").profiler_device_mode_bytes is None


def test_no_room_for_the_buffers_is_a_clear_error_and_nothing_is_lost():
    trn_notebook.set_memory_capacity(6 << 30)
    keep = torch.ones(1 << 29, device="neuron")  # 2 GiB: 6 GiB less 5 GB leaves 1.4 GB
    with pytest.raises(ValueError, match="ProfileMode.DEVICE needs 5000000000 B"), trn_notebook.profile():
        pass
    assert _total() == 6 << 30 and keep[0].item() == 1.0


def test_plan_with_the_profiler_on_has_5_gb_less_per_core_and_says_why():
    from trn_notebook.fidelity.configs import LLAMA_8B
    from trn_notebook.planner import Workload

    spec = LLAMA_8B.config()
    spec.num_hidden_layers, spec.vocab_size, spec.hidden_size, spec.intermediate_size = 1, 256, 64, 128
    spec.num_attention_heads, spec.num_key_value_heads = 4, 4
    small = Workload(batch=1, seq=16)
    plain = trn_notebook.plan(spec, small, layouts="tp1")
    profiled = trn_notebook.plan(spec, small, layouts="tp1", profile=True)
    assert plain.capacity - profiled.capacity == 5_000_000_000
    assert "PROFILED" in str(profiled) and "PROFILED" not in str(plain)
    with pytest.raises(ValueError, match="no published figure"):
        trn_notebook.plan(spec, small, layouts="tp1", chip="trn3", profile=True)
