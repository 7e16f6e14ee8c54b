"""In-place ops run on cached host views: an op that changes a view's geometry must not leave a stale view behind.

Every case runs the same sequence on CPU tensors and on neuron tensors and compares, including a second
tensor with the same geometry over the same storage (it would share the cached view).
"""

from __future__ import annotations

import pytest
import torch

N = "neuron"

CASES = {
    "t_": lambda t: t.t_(),
    "transpose_": lambda t: t.transpose_(0, 1),
    "unsqueeze_": lambda t: t.unsqueeze_(0),
    "squeeze_": lambda t: t.unsqueeze_(0).squeeze_(0),
    "as_strided_": lambda t: t.as_strided_((2, 3), (1, 2)),
    "resize_smaller": lambda t: t.resize_(2, 2),
    "resize_larger": lambda t: t.resize_(5, 5),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_geometry_changing_inplace_op_matches_cpu_and_leaves_aliases_intact(name):
    results = {}
    for device in ("cpu", N):
        base = torch.arange(12.0).reshape(3, 4).to(device)
        twin = base.view(3, 4)  # same storage, same geometry: the same cached host view
        base + 0  # the view is cached now
        changed = CASES[name](base)
        if name == "resize_larger":
            changed = changed.flatten()[:12].reshape(3, 4)  # the tail of a grown storage is uninitialised
        results[device] = (changed * 2 + 1, twin * 2 + 1, twin.sum(), twin.shape)
    (a, b, c, shape), (da, db, dc, dshape) = results["cpu"], results[N]
    assert shape == dshape == (3, 4)
    torch.testing.assert_close(da.cpu(), a)
    torch.testing.assert_close(db.cpu(), b)
    torch.testing.assert_close(dc.cpu(), c)


def test_out_argument_resized_by_the_op_matches_cpu():
    for device in ("cpu", N):
        a = torch.ones(3, 3, device=device)
        out = torch.empty(0, device=device)
        torch.add(a, a, out=out)
        assert out.shape == (3, 3) and out.sum().item() == 18.0, device


def test_inplace_arithmetic_on_shared_storage_matches_cpu():
    for device in ("cpu", N):
        x = torch.zeros(4, 4, device=device)
        y = x.view(4, 4)
        x.add_(1)
        y.mul_(3)
        x.zero_().add_(y + 2)  # y aliases x: after zero_ both read 0, then + 2
        assert x.cpu().tolist() == y.cpu().tolist() == [[2.0] * 4] * 4, device


def test_an_op_that_changes_a_cached_views_geometry_evicts_it():
    """Through the boxed path itself (resize_ normally has a direct kernel): the twin must not see a stale view."""
    from trn_notebook.device.eager import dispatch

    base = torch.arange(12.0).reshape(3, 4).to(N)
    twin = base.view(3, 4)
    base + 0  # caches the (3, 4) view of the storage
    dispatch.run_op(torch.ops.aten.resize_.default, base, [2, 2])
    assert base.shape == (2, 2)
    assert twin.shape == (3, 4)
    torch.testing.assert_close((twin + 0).cpu(), torch.arange(12.0).reshape(3, 4))
    torch.testing.assert_close((base + 0).cpu(), torch.tensor([[0.0, 1.0], [2.0, 3.0]]))
