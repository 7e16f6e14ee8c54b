"""The ``run_op`` path: what happens when one eager op runs on ``neuron`` — the boxed fallback and the direct
kernels, CPU fallbacks and their charge, the foreach fast path, per-op records folded off the hot path,
host-only composites, storage resizes, varlen attention. Imports ``ops/``, ``numerics/``, ``memory/`` and the
device's ledgers (clocks, placement, cost model)."""
