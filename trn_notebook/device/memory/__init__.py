"""Device memory: the caching allocator (the memory counters' one source of truth), its blocks and segments,
the lock its finalizers never enter, how much host memory the simulated HBM may take, and the runtime that
makes a ``neuron`` tensor a non-owning view of host bytes. Imports ``ops/`` and the device's config only."""
