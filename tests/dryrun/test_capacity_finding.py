"""Over capacity inside a dry run is a finding, not the end (issue 48 item 4), and ``torch.neuron``'s memory
functions read the dry allocator inside a dry run and the real one outside (item 5)."""

from __future__ import annotations

import gc
import math

import pytest
import torch

import trn_notebook
from trn_notebook.device.memory.allocator import OutOfDeviceMemory
from trn_notebook.device.memory.runtime import allocator

MiB = 1 << 20


def _grow(n: int, mib: int = 16) -> list[torch.Tensor]:
    return [torch.empty(mib * MiB // 4, device="neuron") for _ in range(n)]


def test_over_capacity_goes_on_and_says_how_much_over(fresh_device) -> None:
    with trn_notebook.dryrun(capacity=64 * MiB) as run:
        with run.phase("forward"):
            kept = _grow(8)  # 128 MiB of live tensors against 64 MiB
        del kept
    assert not run.fits and run.oom is None
    need = run.need
    assert need.peak_allocated == 128 * MiB and need.capacity == 64 * MiB
    assert need.crossing is not None and need.crossing.phase == "forward"
    assert need.crossing.source == f"{__file__}:{_grow.__code__.co_firstlineno + 1}"  # the line that asked
    assert (need.crossing.allocated, need.crossing.asked) == (64 * MiB, 16 * MiB)  # the fifth 16 MiB tensor
    assert need.min_cores == 2 and need.min_chips == 1 and need.cores_per_chip == 4
    assert run.memory.counters.num_ooms == 1  # the device would have stopped once, there
    text = run.summary()
    assert "DOES NOT FIT (modeled): needs peak allocated 128.00 MiB" in text
    assert "first over capacity in phase forward at" in text
    assert "≥ 2 logical cores = ≥ 1 chip of trn2" in text and "sharded evenly (assumed" in text


def test_the_cores_needed_follow_the_peak(fresh_device) -> None:
    with trn_notebook.dryrun(capacity=32 * MiB) as run:
        kept = _grow(13)  # 208 MiB
        del kept
    assert run.need.min_cores == math.ceil(208 / 32) == 7
    assert run.need.min_chips == 2  # 4 logical cores per trn2 chip (LNC=2)


def test_strict_stops_at_the_crossing_as_the_device_does(fresh_device) -> None:
    with (
        pytest.raises(OutOfDeviceMemory, match="out of memory"),
        trn_notebook.dryrun(capacity=64 * MiB, strict=True) as run,
    ):
        _grow(8)
    assert not run.fits and run.oom is not None
    assert run.memory.counters.peak_allocated < 64 * MiB + 16 * MiB
    assert "strict: the run stopped there" in run.summary()


def test_a_run_that_fits_says_nothing_of_capacity(fresh_device) -> None:
    with trn_notebook.dryrun() as run:
        _grow(2)
    assert run.fits and run.need.fits and run.need.crossing is None
    assert "DOES NOT FIT" not in run.summary()


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64))


def _step(model: torch.nn.Module) -> None:
    x = torch.randn(32, 64, device="neuron")
    model(x).sum().backward()


def test_torch_neuron_memory_reads_the_dry_allocator_inside_and_the_real_one_outside(fresh_device) -> None:
    # an earlier test's real tensor freed by the cycle collector mid-run is a real free: collect it first, and
    # keep the collector off while the run goes, so "untouched" can be exact
    gc.collect()
    real_before = allocator.snapshot().counters
    inside: dict[str, object] = {}
    gc.disable()
    try:
        with trn_notebook.dryrun() as run:
            model = _mlp().to("neuron")
            _step(model)
            inside["allocated"] = torch.neuron.memory_allocated()
            inside["peak"] = torch.neuron.max_memory_allocated()
            inside["reserved"] = torch.neuron.memory_reserved()
            inside["stats"] = torch.neuron.memory_stats()["allocated_bytes.all.peak"]
            inside["summary"] = torch.neuron.memory_summary()
            torch.neuron.reset_peak_memory_stats()
            inside["peak_after_reset"] = torch.neuron.max_memory_allocated()
            del model
    finally:
        gc.enable()
    dry_peak = inside["peak"]
    assert allocator.snapshot().counters == real_before  # the real figures untouched
    assert inside["stats"] == dry_peak and inside["reserved"] >= inside["allocated"]
    assert inside["peak_after_reset"] == inside["allocated"]
    assert "dry run: modeled" in str(inside["summary"])
    assert run.figures.memory.counters.num_allocs > 0

    # the same step for real: the dry peak is the real peak above what was live before
    torch.neuron.reset_peak_memory_stats()
    base = torch.neuron.memory_allocated()
    model = _mlp().to("neuron")
    _step(model)
    assert torch.neuron.max_memory_allocated() - base == dry_peak
