"""The simulated caching allocator: documented semantics, exact accounting, invariants, OOM recovery."""

from __future__ import annotations

import gc

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from trn_notebook.device.memory.allocator import MIN_BLOCK, SMALL_SEGMENT, CachingAllocator, round_size

N = "neuron"


def test_round_size_follows_size_classes():
    assert round_size(1) == MIN_BLOCK
    assert round_size(257) == 512
    assert round_size(1024) == 1024
    assert round_size(1_000_000) == 1_000_192  # < 1 MiB: multiples of 256 B
    assert round_size(3 * 2**20 + 1) == 3 * 2**20 + 128 * 1024  # 1-16 MiB: 128 KiB classes
    assert round_size(32 * 2**20 + 3) == 32 * 2**20 + 256  # >= 16 MiB: 256 B alignment only


def test_linear_layer_is_accounted_to_the_byte():
    gc.collect()
    before_active = torch.neuron.memory_stats()["active_bytes.all.current"]
    before_alloc = torch.neuron.memory_allocated()
    lin = torch.nn.Linear(256, 256).to(N)
    stats = torch.neuron.memory_stats()
    assert stats["active_bytes.all.current"] - before_active == (256 * 256 + 256) * 4 == 263_168
    assert torch.neuron.memory_allocated() - before_alloc == 263_168
    lin(torch.randn(2, 256).to(N)).sum().backward()
    del lin
    gc.collect()
    assert torch.neuron.memory_stats()["active_bytes.all.current"] == before_active
    assert torch.neuron.memory_allocated() == before_alloc


def test_freed_blocks_stay_reserved_until_empty_cache():
    gc.collect()
    torch.neuron.empty_cache()
    base_reserved = torch.neuron.memory_reserved()
    x = torch.empty(3 * 2**20, dtype=torch.uint8, device=N)  # large pool: a 20 MiB segment
    assert torch.neuron.memory_reserved() - base_reserved == 20 * 2**20
    del x
    gc.collect()
    assert torch.neuron.memory_reserved() - base_reserved == 20 * 2**20
    torch.neuron.empty_cache()
    assert torch.neuron.memory_reserved() == base_reserved


@settings(max_examples=60, deadline=None)
@given(ops=st.lists(st.tuples(st.booleans(), st.integers(1, 6 * 2**20)), min_size=1, max_size=60))
def test_invariants_hold_under_random_alloc_free(ops):
    alloc = CachingAllocator(capacity=64 * 2**20)
    live = []
    for is_alloc, size in ops:
        if is_alloc or not live:
            try:
                live.append(alloc.malloc(size))
            except torch.OutOfMemoryError:
                pass
        else:
            alloc.free(live.pop(size % len(live)))
        alloc.check_invariants()
        c = alloc.counters
        assert c.active == sum(b.requested for b in live)
        layout = alloc.layout()  # the public view of segments and blocks agrees with the counters
        assert sum(size for _, size, _, _ in layout) == c.reserved
        assert sum(sum(b[1] for b in blocks if not b[3]) for *_, blocks in layout) == c.allocated
        assert sorted(b[0] for *_, blocks in layout for b in blocks if not b[3]) == sorted(b.addr for b in live)
    for b in live:
        alloc.free(b)
    alloc.check_invariants()
    assert alloc.counters.allocated == 0 and alloc.counters.active == 0
    alloc.empty_cache()
    assert alloc.counters.reserved == 0


def test_small_requests_share_a_small_pool_segment():
    alloc = CachingAllocator(capacity=2**30)
    blocks = [alloc.malloc(1000) for _ in range(10)]
    assert alloc.counters.reserved == SMALL_SEGMENT
    assert len({b.segment.addr for b in blocks}) == 1


def test_out_of_memory_raises_with_figures_and_loses_nothing(fresh_device):
    from trn_notebook.device.memory.runtime import allocator

    keep = torch.ones(1000, device=N)
    allocator.capacity = torch.neuron.memory_reserved() + 64 * 2**20
    ooms = torch.neuron.memory_stats()["num_ooms"]
    with pytest.raises(torch.OutOfMemoryError, match=r"tried to allocate 400.00 MiB.*free of .*capacity") as info:
        torch.empty(100 * 2**20, device=N)
    assert info.value.asked == 400 * 2**20
    assert info.value.capacity == allocator.capacity
    assert torch.neuron.memory_stats()["num_ooms"] == ooms + 1
    assert keep.sum().item() == 1000.0  # nothing already allocated was lost
    small = torch.ones(10, device=N) * 2  # the session stays usable
    assert small.sum().item() == 20.0


def test_phases_record_their_own_peaks(fresh_device):
    import trn_notebook

    torch.neuron.reset_peak_memory_stats()
    with trn_notebook.phase("load"):
        w = torch.ones(1024, 1024, device=N)  # 4 MiB
    with trn_notebook.phase("steady"):
        tmp = torch.ones(256, device=N)
        del tmp
    from trn_notebook.device.memory.runtime import allocator

    assert allocator.phase_peaks["load"]["active"] >= 4 * 2**20
    assert allocator.phase_peaks["steady"]["active"] < allocator.phase_peaks["load"]["active"] + 2048
    summary = torch.neuron.memory_summary()
    assert "load" in summary and "steady" in summary
    del w


def test_reserved_allocated_active_ordering_on_the_device():
    x = torch.randn(333, device=N)
    s = torch.neuron.memory_stats()
    assert s["reserved_bytes.all.current"] >= s["allocated_bytes.all.current"] >= s["active_bytes.all.current"]
    del x
