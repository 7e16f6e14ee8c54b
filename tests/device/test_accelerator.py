"""``torch.neuron``, ``torch.accelerator`` and ``neuron:N`` agree: one NeuronCore per process."""

from __future__ import annotations

import pytest
import torch

N = "neuron"


def test_device_counts_agree_with_one_core_per_process():
    assert torch.accelerator.current_accelerator().type == "neuron"
    assert torch.neuron.device_count() == torch.accelerator.device_count() == 1
    assert torch.accelerator.current_device_index() == torch.neuron.current_device() == 0


def test_neuron_1_is_refused_everywhere_with_the_reason():
    with pytest.raises(RuntimeError, match="one NeuronCore per process"):
        torch.ones(2, device="neuron:1")
    with pytest.raises(RuntimeError, match="one NeuronCore per process"):
        torch.accelerator.set_device_index(1)
    with pytest.raises(RuntimeError, match="one NeuronCore per process"):
        torch.neuron.set_device(1)
    torch.accelerator.set_device_index(0)
    assert torch.accelerator.current_device_index() == 0
    assert (torch.ones(2, device=N) + 1).cpu().tolist() == [2.0, 2.0]  # the session stays usable


def test_accelerator_memory_functions_read_the_allocator(fresh_device):
    torch.neuron.empty_cache()
    before = torch.accelerator.memory_allocated()
    x = torch.ones(1 << 16, device=N)  # 256 KiB
    assert torch.accelerator.memory_allocated() - before == x.nbytes == 1 << 18
    assert torch.accelerator.memory_allocated() == torch.neuron.memory_allocated()
    assert torch.accelerator.max_memory_allocated() >= torch.accelerator.memory_allocated()
    assert torch.accelerator.memory_reserved() == torch.neuron.memory_reserved()
    stats = torch.accelerator.memory_stats()
    assert stats["allocated_bytes.all.current"] == torch.neuron.memory_allocated()
    free, total = torch.accelerator.get_memory_info()
    assert total == torch.neuron.get_device_properties(0).total_memory and 0 < free < total
    del x
    assert torch.accelerator.memory_allocated() == before
    with pytest.raises(RuntimeError, match="neuron:1 is not available"):
        torch.accelerator.memory_allocated(1)


def test_accelerator_synchronize_is_a_sync_point_on_neuron(fresh_device):
    # Issue 31: torch.accelerator.synchronize() raised "Backend doesn't support synchronizing all streams on device".
    from trn_notebook.device import clocks

    before = clocks.snapshot().sync_points
    x = torch.ones(8, device=N) * 2
    torch.accelerator.synchronize()
    torch.accelerator.synchronize(0)
    torch.accelerator.synchronize("neuron:0")
    assert clocks.snapshot().sync_points - before == 3
    with pytest.raises(RuntimeError, match="neuron:1 is not available"):
        torch.accelerator.synchronize(1)
    assert x.cpu().tolist() == [2.0] * 8
