"""``torch.autocast("neuron")`` casts what PyTorch's own autocast casts: floating point tensors except
float64 (``is_eligible`` in ATen's autocast). Probe: float64 tensors were cast too. Compared with CPU
autocast, which follows the same rule."""

from __future__ import annotations

import pytest
import torch

from trn_notebook.device.config import override


@pytest.mark.parametrize(
    ("op", "dtype"),
    [(torch.mm, torch.float64), (torch.mm, torch.float32), (torch.nn.functional.softmax, torch.float64)],
    ids=["lower-list-float64", "lower-list-float32", "fp32-list-float64"],
)
def test_autocast_leaves_float64_alone_like_cpu_autocast(op, dtype):
    a = torch.randn(8, 8, dtype=dtype)
    args = (a, a) if op is torch.mm else (a,)
    kwargs = {} if op is torch.mm else {"dim": -1}
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = op(*args, **kwargs)
    with override(allow_float64=True), torch.autocast("neuron", dtype=torch.bfloat16):
        got = op(*(x.to("neuron") for x in args), **kwargs)
    assert got.dtype == want.dtype
    torch.testing.assert_close(got.cpu(), want, rtol=2e-2, atol=2e-2)
