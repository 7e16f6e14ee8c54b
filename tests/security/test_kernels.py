"""NKI kernels stay in user namespaces: ``nki_op`` may not replace or join PyTorch's own operators."""

from __future__ import annotations

import pytest
import torch

from trn_notebook.nki import language as nl
from trn_notebook.nki.bridge import nki_op


def _double(x):
    return nl.multiply(nl.load(x), 2.0)


@pytest.mark.parametrize("name", ["aten::add", "aten::my_new_op", "prims::mul", "c10d::allreduce_", "_x::y"])
def test_a_kernel_may_not_register_into_pytorchs_namespaces(name):
    # Probe: nki_op("aten::add") registered: a kernel replaced an ATen op for the whole process.
    before = torch.add(torch.ones(2), torch.ones(2))
    with pytest.raises(ValueError, match="namespace|namespace::op_name"):
        nki_op(name)(_double)
    torch.testing.assert_close(torch.add(torch.ones(2), torch.ones(2)), before)
    assert not hasattr(torch.ops.aten, "my_new_op")


@pytest.mark.parametrize("name", ["add", "::add", "my lib::add", 3])
def test_a_malformed_name_says_the_form(name):
    with pytest.raises(ValueError, match="namespace::op_name"):
        nki_op(name)(_double)  # type: ignore[arg-type]
