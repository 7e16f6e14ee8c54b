"""A 1-rank ``neuron`` process group in this process: the backend, the clock and the ledger (fast)."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from trn_notebook.device import clocks
from trn_notebook.distributed import comm_log, exposed_comm


@pytest.fixture
def neuron_group(tmp_path, fresh_device):
    dist.init_process_group("neuron", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    comm_log.reset()
    yield
    dist.destroy_process_group()


def test_init_process_group_neuron_maps_both_devices_to_gloo(neuron_group):
    assert dist.get_backend() == "neuron"
    group = dist.group.WORLD
    assert type(group._get_backend(torch.device("neuron"))).__name__ == "ProcessGroupGloo"
    assert type(group._get_backend(torch.device("cpu"))).__name__ == "ProcessGroupGloo"
    t = torch.arange(4.0, device="neuron")
    dist.all_reduce(t)
    assert t.device.type == "neuron" and t.cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
    (rec,) = comm_log.snapshot()
    assert rec["kind"] == "all_reduce" and rec["nbytes"] == 16 and rec["blocking"]


@pytest.mark.slow  # first use of torch.optim imports dynamo (~10 s on a loaded machine)
def test_optimizer_step_waits_for_collectives_in_flight(neuron_group):
    p = torch.nn.Parameter(torch.ones(1024, device="neuron"))
    p.grad = torch.ones(1024, device="neuron")
    work = dist.all_reduce(p.grad, async_op=True)  # overlaps later compute…
    work.wait()
    # a 1-rank group costs nothing on the wire: charge a visible collective on the queue by hand
    clocks.collective("all_reduce", 1e-3, 0.0, blocking=False)
    before = clocks.snapshot().device_free_at_s
    torch.optim.SGD([p], lr=0.1).step()  # …until the step that consumes the gradients
    assert clocks.snapshot().device_free_at_s >= clocks.state.comm_free_at_s > before
    comm, exposed = exposed_comm()
    assert comm >= 1e-3 and exposed > 0
    assert torch.equal(p.detach().cpu(), torch.full((1024,), 0.9))


def test_init_process_group_without_backend_serves_cpu_and_neuron(tmp_path, fresh_device):
    """No backend (PyTorch's newer tutorials): CPU tensors get gloo as without trn-notebook, neuron ours."""
    dist.init_process_group(init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        group = dist.group.WORLD
        assert type(group._get_backend(torch.device("cpu"))).__name__ == "ProcessGroupGloo"
        assert dist.get_backend_config() == "cpu:gloo,neuron:neuron"
        cpu = torch.arange(4.0)
        dist.all_reduce(cpu)
        dev = torch.arange(4.0, device="neuron")
        dist.all_reduce(dev)
        assert dev.device.type == "neuron" and torch.equal(dev.cpu(), cpu)
    finally:
        dist.destroy_process_group()


def test_an_explicit_backend_keeps_pytorchs_own_mapping(tmp_path, fresh_device):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        assert dist.get_backend_config() == "cpu:gloo,cuda:gloo"
        with pytest.raises(RuntimeError, match="no backend for neuron tensors"):
            dist.all_reduce(torch.ones(2, device="neuron"))
    finally:
        dist.destroy_process_group()


def test_integer_all_reduce_goes_through_fp32_under_trainium(neuron_group):
    """Issue 27 (EVRF061): the collective engine reduces integers in FP32; 2^24 + 1 is no FP32 value."""
    import trn_notebook

    values = [2**24 + 1, 2**24 - 1, -3]
    t = torch.tensor(values, dtype=torch.int32, device="neuron")
    with trn_notebook.numerics("trainium"), pytest.warns(trn_notebook.NeuronNumericsWarning, match="EVRF061"):
        dist.all_reduce(t)
        work = dist.all_reduce(u := torch.tensor(values, device="neuron"), async_op=True)  # int64, async
        work.wait()
        floats = torch.tensor([0.5, 2.0**24 + 2], device="neuron")
        dist.all_reduce(floats)
    reference = torch.tensor(values).float().to(torch.int32)
    assert torch.equal(t.cpu(), reference) and t.cpu().tolist() == [2**24, 2**24 - 1, -3]
    assert u.dtype == torch.int64 and u.cpu().tolist() == [2**24, 2**24 - 1, -3]
    assert floats.cpu().tolist() == [0.5, 2.0**24 + 2]
    exact = torch.tensor(values, dtype=torch.int32, device="neuron")
    dist.all_reduce(exact)  # exact mode: gloo's integer sum
    assert exact.cpu().tolist() == values
