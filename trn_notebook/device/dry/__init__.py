"""The dry engine: shape-only ``neuron`` tensors charged as the real device would be — the session that pushes
torch's ``FakeTensorMode`` with the device's dispatch mode above it, the shape-only allocator (the real
allocator's rules, no bytes), result shapes where the device's CPU kernels differ from torch's meta kernels,
real host values for a library's bookkeeping, modules moved in and restored, memory by category at the peak.
Imports ``ops/``, ``eager/`` (one charge for real and dry ops), ``memory/`` and the device's ledgers; the
compiler imports it, the user-facing :mod:`trn_notebook.dry` wraps it."""
