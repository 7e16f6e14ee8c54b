"""Ops PyTorch implements only for accelerators (no CPU kernel), which ATen's composites call on neuron.

ATen takes its accelerator branch for every PrivateUse1 device: ``nn.LSTM``/``nn.LSTMCell`` call
``aten::_thnn_fused_lstm_cell`` and ``nn.GRU``/``nn.GRUCell`` ``aten::_thnn_fused_gru_cell`` (RNN.cpp,
``input.is_privateuseone()``), whose kernels exist for CUDA only. The device runs an op it has no kernel
for through the CPU one, so these need their own record: :data:`RECORDS` marks each such op we
handle (``decomposed=True``: an ``AutogradPrivateUse1`` kernel here runs its decomposition on the device,
so autograd differentiates the decomposition and the fused backward is never needed); every other op
without a CPU kernel is refused with :func:`no_cpu_kernel_error`. :func:`~trn_notebook.device.policy.no_cpu_kernel_ops` is the sweep:
every ATen op with no CPU kernel and how the device treats it.
"""

from __future__ import annotations

import torch

from .registry import OpRecord, op

_BACKWARD = (
    "the fused cell's backward: on neuron the cell runs its decomposition, which autograd differentiates, "
    "so nn.LSTM/nn.GRU never call it"
)
RECORDS: tuple[OpRecord, ...] = (
    op("_thnn_fused_lstm_cell", "native", decomposed=True),
    op("_thnn_fused_gru_cell", "native", decomposed=True),
    op("_thnn_fused_lstm_cell_backward_impl", "unsupported", _BACKWARD),
    op("_thnn_fused_gru_cell_backward", "unsupported", _BACKWARD),
)

# Dispatch keys whose kernel lets the CPU run an op (a dense CPU kernel or a composite of other ops).
_CPU_KEYS = ("CPU", "CompositeImplicitAutograd", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")
# Kernels for other CPU layouts: the op exists for sparse/quantized/mkldnn/nested CPU tensors, not dense ones.
_LAYOUT_KEYS = ("SparseCPU", "SparseCsrCPU", "QuantizedCPU", "MkldnnCPU", "NestedTensorCPU")


def _biased(gates: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return gates if bias is None else gates + bias


def fused_lstm_cell(
    input_gates: torch.Tensor,
    hidden_gates: torch.Tensor,
    cx: torch.Tensor,
    input_bias: torch.Tensor | None = None,
    hidden_bias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``aten::_thnn_fused_lstm_cell`` as ATen's CPU LSTM cell computes it (RNN.cpp ``LSTMCell``).

    Returns ``(hy, cy, workspace)``; the workspace holds the activated gates ``[i, f, g, o]`` as CUDA's does.
    """
    gates = _biased(hidden_gates, hidden_bias) + _biased(input_gates, input_bias)
    i, f, g, o = gates.chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    cy = f * cx + i * g
    hy = o * cy.tanh()
    return hy, cy, torch.cat([i, f, g, o], 1)


def fused_gru_cell(
    input_gates: torch.Tensor,
    hidden_gates: torch.Tensor,
    hx: torch.Tensor,
    input_bias: torch.Tensor | None = None,
    hidden_bias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``aten::_thnn_fused_gru_cell`` as ATen's CPU GRU cell computes it (RNN.cpp ``GRUCell``).

    Returns ``(hy, workspace)``; the workspace holds ``[r, z, n_input, n_hidden, hx]`` as CUDA's does.
    """
    ir, iz, in_ = _biased(input_gates, input_bias).chunk(3, 1)
    hr, hz, hn = _biased(hidden_gates, hidden_bias).chunk(3, 1)
    r = (hr + ir).sigmoid()
    z = (hz + iz).sigmoid()
    n = (in_ + hn * r).tanh()
    hy = (hx - n) * z + n
    return hy, torch.cat([r, z, in_, hn, hx], 1)


_DECOMPOSITIONS = {"_thnn_fused_lstm_cell": fused_lstm_cell, "_thnn_fused_gru_cell": fused_gru_cell}


def register_decompositions(lib: torch.library.Library) -> list[str]:
    """Register the decomposition of every ``decomposed`` record at ``AutogradPrivateUse1`` on ``lib``."""
    names = []
    for record in RECORDS:
        if record.decomposed:
            lib.impl(record.name, _DECOMPOSITIONS[record.name], "AutogradPrivateUse1")
            names.append(record.name)
    return names


def has_cpu_kernel(name: str) -> bool:
    """True when the dispatcher can run ``name`` (``"aten::op.overload"``) on dense CPU tensors."""
    return any(torch._C._dispatch_has_kernel_for_dispatch_key(name, key) for key in _CPU_KEYS)


def no_cpu_kernel_error(name: str, where: str, exc: BaseException) -> NotImplementedError:
    """The error for an op the neuron device reached that has no CPU kernel and no record here."""
    return NotImplementedError(
        f"{name} has no CPU kernel: PyTorch implements it only for accelerators such as CUDA (or only for "
        f"other layouts), and the neuron device runs ops it has no kernel for through the CPU's, so it cannot "
        f"run it (called from {where}). Run this step on the CPU (x.cpu()); if a PyTorch module reached it for "
        f"you (as nn.LSTM reaches aten::_thnn_fused_lstm_cell), it needs a decomposition record in "
        f"trn_notebook/device/ops/accelerator_ops.py. PyTorch said: {str(exc).splitlines()[0]}"
    )
