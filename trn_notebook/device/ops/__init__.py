"""The op table everything reads: one record per ATen op (its category, dtypes, costs, numerics class, autocast
class), the placement policy over it, and the ops ``neuron`` answers without a kernel of its own (SDPA's
kernel choice, FlexAttention's refusal, accelerator-only ops). The leaf of ``device/``: imports nothing of the
device."""
