"""View ops (the most common host_only ops) take a fast path: same values, same aliasing, same errors as the CPU."""

from __future__ import annotations

import pytest
import torch

from trn_notebook.device.placement import placement_log

N = "neuron"

VIEWS = {
    "view": lambda t: t.view(4, 6),
    "view_dtype": lambda t: t.view(torch.int32),
    "reshape": lambda t: t.reshape(2, 12),
    "transpose": lambda t: t.transpose(0, 2),
    "t_of_2d": lambda t: t[0].t(),
    "permute": lambda t: t.permute(2, 0, 1),
    "expand": lambda t: t[:, :1].expand(2, 5, 4),
    "select": lambda t: t.select(1, 2),
    "slice_step": lambda t: t[:, ::2, 1:],
    "diagonal": lambda t: t.diagonal(0, 1, 2),
    "unsqueeze": lambda t: t.unsqueeze(1),
    "squeeze": lambda t: t.unsqueeze(0).squeeze(0),
    "as_strided": lambda t: t.as_strided((3, 2), (2, 5), 1),
    "unfold": lambda t: t.unfold(1, 2, 1),
    "detach": lambda t: t.detach(),
    "view_of_view": lambda t: t.transpose(0, 1).reshape(3, 8).t(),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_view_matches_cpu_and_aliases_the_device_tensor(name):
    cpu = torch.arange(24.0).reshape(2, 3, 4)
    dev = cpu.to(N)
    want, got = VIEWS[name](cpu), VIEWS[name](dev)
    assert got.device.type == "neuron" and got.shape == want.shape and got.stride() == want.stride()
    assert got.storage_offset() == want.storage_offset() and got.dtype == want.dtype
    torch.testing.assert_close(got.cpu(), want)
    aliases_cpu = want.untyped_storage().data_ptr() == cpu.untyped_storage().data_ptr()
    assert (got.untyped_storage().data_ptr() == dev.untyped_storage().data_ptr()) == aliases_cpu  # view iff CPU's is
    got.view(-1)[0:1].fill_(-7) if got.is_contiguous() else got.fill_(-7)
    want.view(-1)[0:1].fill_(-7) if want.is_contiguous() else want.fill_(-7)
    assert torch.equal(dev.cpu().view(torch.int32), cpu.view(torch.int32))  # writes reach the base, as on the CPU


def test_views_of_parameters_complex_and_conjugate_tensors_match_cpu():
    p_cpu = torch.nn.Parameter(torch.arange(6.0).reshape(2, 3))
    p_dev = torch.nn.Parameter(p_cpu.detach().to(N))
    torch.testing.assert_close(p_dev.t().cpu(), p_cpu.t())
    z = torch.complex(torch.arange(4.0), -torch.arange(4.0))
    zd = z.to(N)
    torch.testing.assert_close(zd.conj().view(2, 2).cpu(), z.conj().view(2, 2))
    torch.testing.assert_close(torch.view_as_real(zd).cpu(), torch.view_as_real(z))
    torch.testing.assert_close(zd.conj().real.cpu(), z.conj().real)


def test_a_bad_view_raises_the_cpu_error_and_the_device_stays_usable():
    dev = torch.arange(24.0, device=N).reshape(2, 3, 4)
    with pytest.raises(RuntimeError, match="view size is not compatible|invalid for input of size"):
        dev.transpose(0, 1).view(24)
    with pytest.raises(RuntimeError, match="out of bounds"):
        dev.as_strided((10, 10), (10, 1))
    assert dev.view(24).sum().item() == 276.0


def test_views_are_logged_as_host_only(fresh_device):
    dev = torch.ones(4, 4, device=N)
    dev.t()
    dev.view(16)
    snap = placement_log.snapshot()
    assert snap["as_strided"].category == "host_only" and snap["view"].category == "host_only"
    assert snap["view"].calls == 1 and snap["view"].device_s == 0.0 and snap["view"].host_s > 0
