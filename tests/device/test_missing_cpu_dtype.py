"""Op/dtype pairs without a CPU kernel: histc on integers upcasts (once, loudly); others fail clearly."""

from __future__ import annotations

import warnings

import pytest
import torch

import trn_notebook.device.eager.dispatch as dispatch


def test_histc_int32_matches_cpu_float_path(fresh_device):
    # transformers' MoE load-balancing loss calls histc on int32 off-CPU and on float32 on the CPU.
    experts = torch.randint(0, 8, (64,), generator=torch.Generator().manual_seed(0), dtype=torch.int32)
    ref = torch.histc(experts.float(), bins=8, min=0, max=8)
    dispatch._warned.discard("upcast:histc:torch.int32")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = torch.histc(experts.to("neuron"), bins=8, min=0, max=8)
        torch.histc(experts.to("neuron"), bins=8, min=0, max=8)
    assert got.dtype == torch.int32 and got.device.type == "neuron"
    assert torch.equal(got.cpu(), ref.to(torch.int32))
    said = [w for w in caught if "computes it in float32" in str(w.message)]
    assert len(said) == 1 and said[0].filename == __file__


def test_missing_kernel_error_names_op_dtype_and_line(fresh_device):
    b = torch.ones(2, 2, dtype=torch.bool)
    with pytest.raises(NotImplementedError, match="not implemented for 'Bool'"):
        torch.addmv(b[0], b, b[0])  # the CPU itself has no kernel
    with pytest.raises(NotImplementedError) as err:
        torch.addmv(b[0].to("neuron"), b.to("neuron"), b[0].to("neuron"))
    msg = str(err.value)
    assert "aten::addmv" in msg and "torch.bool" in msg and f"{__file__}:" in msg and "x.float()" in msg
    assert torch.ones(2, device="neuron").sum().item() == 2.0  # the session stays usable
