"""torch.neuron.Stream/Event on the modeled clock, and neuron storage resize through the allocator."""

from __future__ import annotations

import gc

import pytest
import torch

from trn_notebook.device import clocks


def test_event_elapsed_time_is_modeled_milliseconds(fresh_device):
    start = torch.neuron.Event(enable_timing=True)
    end = torch.neuron.Event(enable_timing=True)
    a = torch.randn(256, 256).to("neuron")
    start.record()
    before = clocks.snapshot().device_free_at_s
    b = a @ a
    end.record()
    after = clocks.snapshot().device_free_at_s
    assert b.shape == (256, 256)
    assert start.elapsed_time(end) == pytest.approx((after - before) * 1e3)
    assert start.elapsed_time(end) > 0
    with pytest.raises(RuntimeError, match="enable_timing"):
        torch.neuron.Event().elapsed_time(end)


def test_stream_context_and_wait_event_delay_the_compute_queue(fresh_device):
    s = torch.neuron.Stream(priority=-1)
    assert torch.neuron.current_stream() is torch.neuron.default_stream()
    with torch.neuron.stream(s):
        assert torch.neuron.current_stream() is s
        clocks.collective("all_gather", 5e-3, 0.0, blocking=False)
        from trn_notebook.device.streams import note_collective_end

        note_collective_end(clocks.state.comm_free_at_s)
        ev = s.record_event()
    assert torch.neuron.current_stream() is torch.neuron.default_stream()
    assert ev.time_s == pytest.approx(5e-3)
    torch.neuron.current_stream().wait_event(ev)
    assert clocks.snapshot().device_free_at_s == pytest.approx(5e-3)


def test_storage_resize_frees_and_regrows_through_the_allocator(fresh_device):
    gc.collect()
    base = torch.neuron.memory_allocated()
    t = torch.arange(4096, dtype=torch.float32).to("neuron")
    view = t[10:20]
    st = t.untyped_storage()
    full = torch.neuron.memory_allocated() - base
    assert full >= 4096 * 4
    st.resize_(0)
    assert torch.neuron.memory_allocated() == base
    assert t.untyped_storage().nbytes() == 0
    st.resize_(4096 * 4)
    assert torch.neuron.memory_allocated() - base == full
    t.copy_(torch.arange(4096, dtype=torch.float32))
    assert torch.equal(view.cpu(), torch.arange(10, 20, dtype=torch.float32))  # the view sees the new bytes
    st.resize_(8 * 4)  # shrink keeps the prefix
    assert torch.equal(torch.empty(0, device="neuron").set_(st, 0, (8,), (1,)).cpu(), torch.arange(8.0))
    del t, view, st
    gc.collect()
    assert torch.neuron.memory_allocated() == base
    with pytest.raises(ValueError, match=">= 0"):
        torch.zeros(2, device="neuron").untyped_storage().resize_(-1)
    cpu = torch.zeros(4).untyped_storage()
    cpu.resize_(32)  # other devices keep PyTorch's own resize
    assert cpu.nbytes() == 32
