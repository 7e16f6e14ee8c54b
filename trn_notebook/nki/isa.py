"""``nki.isa`` (``nisa``): the instructions of one NeuronCore, run on CPU tensors and fed to the cost model.

Each instruction checks the hardware rules of the NKI ISA reference (Neuron SDK 2.32, NKI 0.6.0):
which buffers its operands may live in, partition and free sizes, dtypes. Engines compute in
float32 and cast to ``dst.dtype``, as documented. A violation raises
:class:`~trn_notebook.nki.NkiError` naming the kernel line.
"""

from .instr_common import engine, reduce_cmd
from .instr_compute import activation, reciprocal, tensor_reduce, tensor_scalar, tensor_tensor, tensor_tensor_scan
from .instr_data import dma_copy, iota, memset, tensor_copy
from .instr_tensor import nc_matmul, nc_transpose

__all__ = [
    "activation",
    "dma_copy",
    "engine",
    "iota",
    "memset",
    "nc_matmul",
    "nc_transpose",
    "reciprocal",
    "reduce_cmd",
    "tensor_copy",
    "tensor_reduce",
    "tensor_scalar",
    "tensor_tensor",
    "tensor_tensor_scan",
]
