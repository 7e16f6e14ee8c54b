"""Model-level cost: one graph execution (prefill or decode step) of a TP-sharded model, as a budget.

A step's modeled time is the sum of

* **kernels** of the graph at the calibrated efficiencies (``device.costmodel.kernel_terms``, the
  same function the eager device and the compiler's schedule use), split by which roofline term
  dominates into *compute* and *weight/KV reads*; FLOPs and bytes per rank = the whole model's / TP
  (a Megatron split), with K/V bytes replicated when there are fewer K/V heads than ranks, and
  nothing split for weights the deployment replicates on every rank (``OpCount.replicated``);
  a matmul's compute is divided by its **PE-array utilisation** at the per-rank shape
  (:func:`pe_utilisation`: the 128-row contraction of TensorE and the 64-cycle floor of an
  ``nc_matmul``, trainium-figures.md A3), so a weight sharded to 32 rows per rank runs at a quarter of
  the array; a prefill's masked attention on trn2 runs NxD Inference's causal flash-attention kernel,
  which skips the upper-triangle tiles (:func:`causal_attention_kernel`: half its query x key pairs);
* **collectives** the layout implies: two all-reduces of the step's activations per decoder layer
  (after attention, after the MLP) on TP ranks, with the α–β model of
  ``distributed.commmodel`` on the fabric TP spans, its stand-alone floor replaced by the in-graph
  ``collective_in_graph_s``;
* **launch**: one graph launch (``graph_launch_s``) plus the in-graph dispatch of each kernel
  (``kernel_in_graph_s``);
* **host**: the serving loop's work per step (``serving_step_s``, plus ``vllm_step_s`` under vLLM)
  and, with sampling on the host, copying the logits out and sampling them on the host CPU;
* **padding**: the part of the kernels spent on positions padded to the bucket (reported, and
  included in compute / reads above it is not added twice).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from ..compiler import compile_time
from ..device import costmodel
from ..device.chips import INF2, ChipSpec, get_chip_spec
from ..distributed import commmodel
from .walk import ATTENTION, GROUPED, MATMUL, OTHER, OpCount

PARTS = ("compute", "reads", "collectives", "host", "launch")


@dataclass(frozen=True)
class Layout:
    """How a model is deployed: chip, TP degree, the serving stack and where sampling runs."""

    chip: str = "trn2"
    tp: int = 8
    stack: str = "nxdi"  # "nxdi" (native NxD Inference) or "vllm"
    sampling: str = "device"  # "device" or "host"


@dataclass(frozen=True)
class Budget:
    """Modeled seconds of one step, by part (``PARTS``); ``padding_s`` is the share of compute/reads
    spent on padded positions (already inside those parts)."""

    compute_s: float = 0.0
    reads_s: float = 0.0
    collectives_s: float = 0.0
    host_s: float = 0.0
    launch_s: float = 0.0
    padding_s: float = 0.0
    kernels: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def total_s(self) -> float:
        """The step's modeled time."""
        return self.compute_s + self.reads_s + self.collectives_s + self.host_s + self.launch_s

    def plus(self, other: Budget) -> Budget:
        """Part-wise sum (a step of two graphs, or waits added to a step)."""
        return Budget(
            self.compute_s + other.compute_s,
            self.reads_s + other.reads_s,
            self.collectives_s + other.collectives_s,
            self.host_s + other.host_s,
            self.launch_s + other.launch_s,
            self.padding_s + other.padding_s,
            self.kernels + other.kernels,
            self.notes + other.notes,
        )

    def scaled(self, k: float) -> Budget:
        """Every part times ``k``."""
        return Budget(
            self.compute_s * k,
            self.reads_s * k,
            self.collectives_s * k,
            self.host_s * k,
            self.launch_s * k,
            self.padding_s * k,
            self.kernels,
            self.notes,
        )


PE_ROWS = 128  # TensorE contraction (partition) rows per nc_matmul (trainium-figures.md A2/A3)
MATMUL_MIN_CYCLES = 64  # nc_matmul costs max(min(64, N_stationary), N_moving) cycles (A3)


def rank_shape(op: OpCount, tp: int, hidden: int) -> tuple[int, int, int, int]:
    """``(batch, m, k, n)`` of one rank's share of a matmul-class op (zeros when the walk recorded no
    shape). Megatron / NxD Inference layout: an expert's intermediate dimension is split (``gate_up``
    by columns, ``down`` by rows); a weight whose output is the hidden size is row-parallel (its
    contraction split), any other weight column-parallel but never below one 128-wide head (K/V heads
    fewer than ranks are replicated); a batched product of activations splits its heads; a replicated
    weight is whole on every rank."""
    b, m, k, n = op.batch, op.m, op.k, op.n
    if not k or not n or tp <= 1 or op.replicated:
        return b, m, k, n
    if op.kind == GROUPED:
        return (b, m, max(1, k // tp), n) if n == hidden else (b, m, k, max(1, n // tp))
    if b > 1:
        return max(1, b // tp), m, k, n
    if op.weight_bytes <= 0:
        return b, m, k, n
    if n == hidden:
        return b, m, max(1, k // tp), n
    return b, m, k, max(n // tp, min(n, PE_ROWS))


def pe_utilisation(k: int, n: int) -> float:
    """Share of the TensorE array a ``[.., k] @ [k, n]`` product keeps busy (1.0 when no shape is
    known): the contraction fills ``k`` of 128 partition rows per pass (``k / (128 ceil(k / 128))``),
    and a moving dimension under 64 columns still costs the 64-cycle minimum of an ``nc_matmul``
    (``min(1, n / 64)``); the token dimension is taken to fill its side (it does at prefill; decode
    matmuls are bound by their weight reads)."""
    if k <= 0 or n <= 0:
        return 1.0
    return k / (PE_ROWS * math.ceil(k / PE_ROWS)) * min(1.0, n / MATMUL_MIN_CYCLES)


def causal_attention_kernel(layout: Layout, tokens: int) -> bool:
    """Whether a prefill of ``tokens`` positions per sequence runs NxD Inference's causal flash-attention
    kernel, which skips the upper-triangle tiles of a causal mask ("Enables compute skipping: skip
    MM1/MM2 for upper triangle tiles", aws-neuron-sdk nki/library/api/attention-cte.rst L125-128).
    NxD Inference picks that kernel on its own at LNC=2 (trn2's default) unless ``attn_kernel_enabled``
    is set False: with a mask, for ``q_len >= 1024`` divisible by 512 or ``q_len < 1024`` divisible by
    256 (neuronx-distributed-inference modules/attention/attention_base.py,
    ``get_flash_attention_strategy``: SHARDED_KERNEL; ``perform_prefill`` passes ``causal_mask``); the
    Qwen3.5 contrib's attention calls the same kernel with ``use_causal_mask=True``
    (contrib/models/Qwen3.5-2B/src/modeling_qwen35.py, ``perform_prefill``). Not on inf2 (LNC=1)."""
    if tokens <= 1 or layout.chip.strip().lower() not in ("trn2", "trn3"):
        return False
    return tokens % 512 == 0 if tokens >= 1024 else tokens % 256 == 0


def kernels_budget(
    ops: list[OpCount],
    chip: ChipSpec,
    tp: int,
    *,
    kv_heads: int,
    real_fraction: float = 1.0,
    hidden: int = 0,
    causal_kernel: bool = False,
) -> Budget:
    """Kernel time per rank of the walked ops (see the module docs); ``real_fraction`` = real tokens /
    padded tokens of a prefill, for the padding share; ``hidden`` = the model's hidden size (which
    weights are row-parallel, :func:`rank_shape`); ``causal_kernel``: a masked attention op runs the
    causal flash kernel (:func:`causal_attention_kernel`) and computes half its query x key pairs."""
    compute = reads = 0.0
    kernels = 0
    kv_scale = max(kv_heads, tp) / kv_heads / tp if kv_heads else 1.0 / tp
    for op in ops:
        split = 1 if op.replicated else tp
        flops = op.flops / split
        if causal_kernel and op.kind == ATTENTION and op.masked:
            flops /= 2
        if op.kind in (MATMUL, GROUPED, ATTENTION):
            nbytes = (op.bytes - op.kv_bytes) / split + op.kv_bytes * (kv_scale if split > 1 else 1.0)
            _, _, k, n = rank_shape(op, tp, hidden)
            c, m = costmodel.kernel_terms(chip, flops / pe_utilisation(k, n), nbytes, op.dtype)
            kernels += 1
        else:  # fused into a neighbouring kernel: its FLOPs only (no HBM traffic of its own)
            c, m = costmodel.kernel_terms(chip, flops, 0.0, op.dtype)[0], 0.0
        if c >= m:
            compute += c
        else:
            reads += m
    consts = costmodel.get_cost_constants()
    return Budget(
        compute_s=compute,
        reads_s=reads,
        launch_s=consts.graph_launch_s + kernels * consts.kernel_in_graph_s,
        padding_s=(compute + reads) * (1.0 - real_fraction),
        kernels=kernels,
    )


def graph_instructions(ops: list[OpCount], tp: int, hidden: int) -> float:
    """Instructions the Neuron compiler schedules for one rank of a walked graph
    (``compiler.compile_time``): a matmul with a recorded shape issues one ``nc_matmul`` per 128-row x
    128-column stationary tile per 512 moving rows of its per-rank shape (:func:`rank_shape`); any
    other kernel the FLOPs/bytes estimate of ``kernel_instructions``; fused element-wise ops none."""
    total = 0.0
    for op in ops:
        if op.kind == OTHER:
            continue
        b, m, k, n = rank_shape(op, tp, hidden)
        if k and n and m:
            total += compile_time.matmul_instructions(b, m, k, n)
        else:
            split = 1 if op.replicated else tp
            total += compile_time.kernel_instructions(op.flops / split, op.bytes / split, op.dtype.itemsize)
    return total


def chip_of(name: str) -> ChipSpec:
    """The chip model of a layout (``trn2``, ``trn3``, or ``inf2`` for the inf2 ledger row)."""
    return INF2 if name.strip().lower() == "inf2" else get_chip_spec(name)


def tp_collectives_s(layers: int, activation_bytes: int, tp: int, chip: ChipSpec) -> float:
    """Two all-reduces per decoder layer of ``activation_bytes`` on ``tp`` ranks (modeled): on one
    chip's fabric when TP fits a chip, else over NeuronLink."""
    if tp <= 1:
        return 0.0
    comm = commmodel.get_comm_constants()
    fabric = "intra_chip" if tp <= chip.logical_cores else "neuronlink"
    one, _, _ = commmodel.collective_seconds("all_reduce", activation_bytes, tp, fabric=fabric)
    one += costmodel.get_cost_constants().collective_in_graph_s - comm.launch_s
    return 2 * layers * one


def host_sampling_s(batch: int, vocab: int) -> float:
    """Sampling on the host: the FP32 logits copied device->host, a host sort of each row (top-k/top-p)
    on the modeled host CPU, and the token ids copied back."""
    c = costmodel.get_cost_constants()
    n = batch * vocab
    nbytes = 4 * n
    sort = n * max(1.0, math.log2(vocab)) / c.host_peak_flops
    memory = 2 * nbytes / c.host_memory_bandwidth
    return (
        costmodel.transfer_seconds(nbytes)
        + c.host_dispatch_s
        + max(sort, memory)
        + costmodel.transfer_seconds(8 * batch)
    )


def step_budget(
    ops: list[OpCount],
    layout: Layout,
    *,
    layers: int,
    hidden: int,
    kv_heads: int,
    tokens: int,
    vocab: int,
    batch: int,
    real_fraction: float = 1.0,
) -> Budget:
    """Modeled budget of one graph execution of a serving loop (prefill of ``tokens`` padded positions
    per sequence, or a decode step with ``tokens`` = 1) on ``layout``. Raises ``ValueError`` for an
    unknown chip, stack or sampling place."""
    if layout.stack not in ("nxdi", "vllm"):
        raise ValueError(f"unknown serving stack {layout.stack!r}; use 'nxdi' or 'vllm'")
    if layout.sampling not in ("device", "host"):
        raise ValueError(f"unknown sampling place {layout.sampling!r}; use 'device' or 'host'")
    chip = chip_of(layout.chip)
    consts = costmodel.get_cost_constants()
    causal = causal_attention_kernel(layout, tokens)
    b = kernels_budget(
        ops, chip, layout.tp, kv_heads=kv_heads, real_fraction=real_fraction, hidden=hidden, causal_kernel=causal
    )
    coll = tp_collectives_s(layers, batch * tokens * hidden * torch.bfloat16.itemsize, layout.tp, chip)
    host = consts.serving_step_s + (consts.vllm_step_s if layout.stack == "vllm" else 0.0)
    if layout.sampling == "host":
        host += host_sampling_s(batch, vocab)
    return b.plus(Budget(collectives_s=coll, host_s=host))
