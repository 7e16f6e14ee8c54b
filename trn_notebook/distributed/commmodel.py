"""α–β cost of collectives on the modeled device clock, per algorithm and fabric.

Constants come from ``shared/reference/trainium-figures.md`` (sources there) and can be overridden
with :func:`set_comm_constants`:

* per-hop latency α: intra-node Ring/KangaRing hop ≈1–2 µs (A4, intranode-collective-comm.rst L61),
  inter-node hop ≈15 µs (A4, internode-collective-comm.rst L66);
* bandwidth β: on one chip the DMA rate of a NeuronCore, 368 GB/s (A1, nki-dma-bandwidth-guide.rst);
  NeuronLink-v3 intra-instance 1,024 GB/s per chip (A4, trn2-arch.rst L97); EFAv3 50 Gbps per rank
  at LNC=2 (A4, collectives.rst L110);
* a fixed per-collective floor: the small all-reduce floor is ≈58 µs on 2 ranks (D3/B7), taken as
  ``launch_s`` = 58 µs − 2 hops;
* the fabrics' bandwidths, the cores per chip and the chips per instance are the **chip's**
  (:class:`~trn_notebook.device.chips.ChipSpec`, sourced there): the constants in force are those of the
  chip the device (or a dry run of :func:`trn_notebook.plan`) models, so a Trn1 plan crosses NeuronLink-v2 and
  800 Gbps EFA. The defaults below are Trn2's at LNC=2;
* algorithm switch points (A4, intranode-collective-comm.rst L161-189): mesh below 1 MB, recursive
  halving/doubling (``rdh``) 1–56 MB, ring above.

Mesh and rdh move bytes less efficiently than a ring (``*_bw_efficiency``, calibrated to those
switch points; ``e`` below). With ``N`` ranks, ``S`` bytes (the full tensor of an all-reduce, the gathered result of an
all-gather / the input of a reduce-scatter, the whole buffer of an all-to-all):

=================  =====================  =========================================
collective         ring                   mesh / rdh
=================  =====================  =========================================
all_reduce         2(N-1)α + 2(N-1)/N·S/β  mesh: 2α + 2(N-1)/N·S/(eβ); rdh: 2⌈log2 N⌉α + same
all_gather,        (N-1)α + (N-1)/N·S/β    mesh: α + …; rdh: ⌈log2 N⌉α + …
reduce_scatter
broadcast, reduce  (N-1)α + S/β            mesh: α + S/β (root's links in parallel)
all_to_all         (N-1)α + (N-1)/N·S/β    mesh: α + (N-1)/N·S/β
send / recv        α + S/β
barrier            2(N-1)α (no bytes)      mesh: 2α
=================  =====================  =========================================
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

from .. import locks as _locks
from .. import state as _state
from ..device.chips import CHIPS, ChipSpec
from ..device.memory import runtime

MB = 1_000_000
_TRN2 = CHIPS["trn2"]


@dataclass(frozen=True)
class CommConstants:
    """Latency (s) and bandwidth (bytes/s) per fabric, plus the fixed per-collective floor."""

    alpha_intra_chip_s: float = 1.5e-6
    beta_intra_chip: float = _TRN2.dma_bytes_per_s_per_core
    alpha_neuronlink_s: float = 1.5e-6
    beta_neuronlink: float = _TRN2.neuronlink_bytes_per_s
    alpha_efa_s: float = 15e-6
    beta_efa: float = _TRN2.efa_bits_per_s / 8 / _TRN2.instance_ranks  # per rank: 50 Gbps at LNC=2
    launch_s: float = 55e-6
    # Bandwidth efficiency of mesh and rdh relative to ring (our calibration, not a published figure):
    # chosen so that on 16 ranks over NeuronLink the model's crossovers fall at the runtime's
    # documented switch points (mesh < 1 MB, rdh 1-56 MB, ring above), see test_commmodel.
    mesh_bw_efficiency: float = 0.16
    rdh_bw_efficiency: float = 0.757
    mesh_below_bytes: int = 1 * MB
    ring_above_bytes: int = 56 * MB
    cores_per_chip: int = _TRN2.logical_cores  # logical NeuronCores per chip (Trn2: 4 at LNC=2)
    chips_per_node: int = _TRN2.chips_per_instance  # trn2.48xlarge: 16
    chip: str = _TRN2.name  # the chip whose network the fields above describe


_lock = _locks.make("leaf", "comm constants")
_constants = CommConstants()
_state.register("comm_constants", _state.Globals(__name__, "_constants"), reset=False)  # settings

FABRICS = ("intra_chip", "neuronlink", "efa")
ALGORITHMS = ("ring", "mesh", "rdh")


def constants_for(chip: ChipSpec, base: CommConstants | None = None) -> CommConstants:
    """``base`` (default: the constants set) with the network of ``chip``: the fabrics' bandwidths (EFA shared by
    the instance's ranks), its logical cores per chip and chips per instance; latencies and the rest kept."""
    base = base or _constants
    return dataclasses.replace(
        base,
        beta_intra_chip=chip.dma_bytes_per_s_per_core,
        beta_neuronlink=chip.neuronlink_bytes_per_s,
        beta_efa=chip.efa_bits_per_s / 8 / chip.instance_ranks,
        cores_per_chip=chip.logical_cores,
        chips_per_node=chip.chips_per_instance,
        chip=chip.name,
    )


@functools.lru_cache(maxsize=16)
def _on_chip(base: CommConstants, chip: ChipSpec) -> CommConstants:
    return constants_for(chip, base)


def get_comm_constants() -> CommConstants:
    """The constants in force: those set, on the network of the chip the device models.

    When the device's chip (or its logical cores) differs from the chip the set constants describe, the
    bandwidths, cores per chip and chips per instance are that chip's (:func:`constants_for`).
    """
    c, chip = _constants, runtime.state.chip
    if c.chip == chip.name and c.cores_per_chip == chip.logical_cores:
        return c
    return _on_chip(c, chip)


def set_comm_constants(**changes: float | int) -> CommConstants:
    """Override constants by field name; raises ``TypeError`` naming the valid fields for an unknown one."""
    global _constants
    valid = {f.name for f in dataclasses.fields(CommConstants)}
    unknown = set(changes) - valid
    if unknown:
        raise TypeError(f"unknown comm constant(s) {sorted(unknown)}; valid: {sorted(valid)}")
    with _lock:
        _constants = dataclasses.replace(_constants, **changes)  # type: ignore[arg-type]
    return _constants


def reset_comm_constants() -> None:
    """Restore the published defaults."""
    global _constants
    with _lock:
        _constants = CommConstants()


def fabric_for(world_size: int, c: CommConstants | None = None) -> str:
    """The slowest fabric a group of ``world_size`` consecutive ranks crosses."""
    c = c or get_comm_constants()
    if world_size <= c.cores_per_chip:
        return "intra_chip"
    if world_size <= c.cores_per_chip * c.chips_per_node:
        return "neuronlink"
    return "efa"


def choose_algorithm(nbytes: int, c: CommConstants | None = None) -> str:
    """The runtime's empirical choice by message size: mesh < 1 MB, rdh up to 56 MB, ring above."""
    c = c or get_comm_constants()
    if nbytes < c.mesh_below_bytes:
        return "mesh"
    if nbytes <= c.ring_above_bytes:
        return "rdh"
    return "ring"


def collective_seconds(
    kind: str, nbytes: int, world_size: int, *, algorithm: str | None = None, fabric: str | None = None
) -> tuple[float, str, str]:
    """Modeled seconds of one collective; returns ``(seconds, algorithm, fabric)``.

    ``kind`` is one of all_reduce, all_gather, reduce_scatter, broadcast, reduce, gather, scatter,
    all_to_all, send, recv, barrier. Raises ``ValueError`` for an unknown kind, algorithm or fabric.
    """
    c = get_comm_constants()
    n = max(int(world_size), 1)
    fabric = fabric or fabric_for(n, c)
    if fabric not in FABRICS:
        raise ValueError(f"unknown fabric {fabric!r}; choose one of {FABRICS}")
    algorithm = algorithm or choose_algorithm(nbytes, c)
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; choose one of {ALGORITHMS}")
    alpha = getattr(c, f"alpha_{fabric}_s")
    beta = getattr(c, f"beta_{fabric}")
    if n == 1:
        return 0.0, algorithm, fabric
    log_n = math.ceil(math.log2(n))
    efficiency = {"ring": 1.0, "mesh": c.mesh_bw_efficiency, "rdh": c.rdh_bw_efficiency}[algorithm]
    share = (n - 1) / n * nbytes / (beta * efficiency)
    hops = {"ring": n - 1, "mesh": 1, "rdh": log_n}[algorithm]
    if kind == "all_reduce":
        t = 2 * hops * alpha + 2 * share
    elif kind in ("all_gather", "reduce_scatter", "all_to_all", "gather", "scatter"):
        t = hops * alpha + share
    elif kind in ("broadcast", "reduce"):
        t = hops * alpha + nbytes / (beta * efficiency)
    elif kind in ("send", "recv"):
        return c.launch_s / 2 + alpha + nbytes / beta, "p2p", fabric
    elif kind == "barrier":
        t = 2 * hops * alpha
    else:
        raise ValueError(f"unknown collective kind {kind!r}")
    return c.launch_s + t, algorithm, fabric
