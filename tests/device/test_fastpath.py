"""The eager hot path's shortcuts (direct kernels, inlined accounting, allocator fast path) change no figure.

Each expected figure is computed here from first principles (the cost model's formulas on the chip's
published numbers, the allocator's size classes), not by the code under test, so a shortcut that
drifts from the slow path fails even if it is self-consistent.
"""

from __future__ import annotations

import torch

from trn_notebook.device import costmodel, override
from trn_notebook.device.clocks import clocks
from trn_notebook.device.memory import hostmem
from trn_notebook.device.memory.allocator import round_size
from trn_notebook.device.memory.runtime import allocator, get_chip, set_chip
from trn_notebook.device.placement import placement_log

N = "neuron"


def _roofline(flops: float, nbytes: float, dtype: torch.dtype) -> float:
    chip, c = get_chip(), costmodel.get_cost_constants()
    compute = flops / (chip.device_peak_flops(dtype) * c.compute_efficiency)
    memory = nbytes / (chip.hbm_bandwidth / chip.logical_cores * c.memory_efficiency)
    return max(compute, memory)


def _figures(fn):
    p0, c0, m0 = placement_log.snapshot(), clocks.snapshot(), allocator.snapshot().counters
    out = fn()
    p1, c1, m1 = placement_log.snapshot(), clocks.snapshot(), allocator.snapshot().counters
    return out, p1.since(p0), c1.since(c0), (m0, m1)


def test_pointwise_add_charges_exactly_the_slow_path_figures(fresh_device):
    a, b = torch.rand(4, 4, device=N), torch.rand(4, 4, device=N)
    with override(eager_fusion=False):
        out, place, clk, (m0, m1) = _figures(lambda: a + b)
    assert torch.equal(out.cpu(), a.cpu() + b.cpu())
    c = costmodel.get_cost_constants()
    expected = _roofline(64 / 4, 64 * 3, torch.float32) + c.eager_launch_s
    entry = place["add"]
    assert (entry.calls, entry.category, entry.h2d, entry.d2h) == (1, "native", 0, 0)
    assert entry.device_s == expected
    assert clk.launches == 1 and clk.sim_device_s == expected
    assert m1.num_allocs - m0.num_allocs == 1
    assert m1.allocated - m0.allocated == round_size(64)
    assert m1.active - m0.active == 64


def test_matmul_class_cost_uses_its_record_and_the_dtype_peak(fresh_device):
    a = torch.rand(8, 16, device=N, dtype=torch.bfloat16)
    b = torch.rand(16, 4, device=N, dtype=torch.bfloat16)
    with override(eager_fusion=False):
        _, place, clk, _ = _figures(lambda: a @ b)
    nbytes = (8 * 16 + 16 * 4 + 8 * 4) * 2
    expected = _roofline(2.0 * 8 * 4 * 16, nbytes, torch.bfloat16) + costmodel.get_cost_constants().eager_launch_s
    assert place["mm"].device_s == expected == clk.sim_device_s


def test_cached_rates_follow_the_chip_and_the_cost_constants(fresh_device):
    before = costmodel.get_cost_constants()
    chip = get_chip()
    a = torch.rand(256, 256, device=N)
    try:
        costmodel.set_cost_constants(compute_efficiency=0.3)
        set_chip("trn3")
        with override(eager_fusion=False):
            _, place, _, _ = _figures(lambda: a @ a)
        flops = 2.0 * 256 * 256 * 256
        assert place["mm"].device_s == _roofline(flops, 3 * 256 * 256 * 4, torch.float32) + before.eager_launch_s
        assert (
            costmodel.roofline_rates(get_chip(), torch.float32)[0] == get_chip().device_peak_flops(torch.float32) * 0.3
        )
    finally:
        costmodel.set_cost_constants(**{"compute_efficiency": before.compute_efficiency})
        set_chip(chip.name, cores=chip.logical_cores)


def test_inplace_view_and_multi_output_results_keep_their_identity_and_memory(fresh_device):
    a, b = torch.rand(4, 4, device=N), torch.rand(4, 4, device=N)
    ref = a.cpu() + b.cpu()
    _, _, _, (m0, m1) = _figures(lambda: a.add_(b))
    assert torch.equal(a.cpu(), ref) and m1.num_allocs == m0.num_allocs  # in place: no new block
    assert a.add_(b) is a
    v, place, _, (m0, m1) = _figures(lambda: a.view(16))
    assert v.untyped_storage().data_ptr() == a.untyped_storage().data_ptr() and m1.num_allocs == m0.num_allocs
    assert place["view"].category == "host_only" and place["view"].device_s == 0.0
    (vals, idx), _, _, (m0, m1) = _figures(lambda: a.max(dim=1))
    cv, ci = a.cpu().max(dim=1)
    assert torch.equal(vals.cpu(), cv) and torch.equal(idx.cpu(), ci)
    assert m1.num_allocs - m0.num_allocs == 2 and m1.active - m0.active == 4 * 4 + 4 * 8


def test_freed_results_return_their_blocks(fresh_device):
    a = torch.rand(64, 64, device=N)
    start = allocator.snapshot().counters
    for _ in range(20):
        _ = a * 2  # the previous result dies as the next one is made: its block is reused
    del _
    end = allocator.snapshot().counters
    assert end.allocated == start.allocated and end.active == start.active
    assert end.num_allocs - start.num_allocs == 20 == end.num_frees - start.num_frees
    assert end.reserved == start.reserved
    allocator.check_invariants()


def test_host_probe_reads_meminfo():
    avail = hostmem.available_bytes()
    assert avail is None or avail > 0
