"""Chip models of Trainium (Trn1, Trn1n), Trainium2 and Trainium3, with the network of their instances.

Trainium2 and Trainium3 from shared/reference/torchneuron.md (Hardware table) and trainium-figures.md A1-A6;
Trainium from aws-neuron-sdk @ 81ce03ae (``about-neuron/arch/neuron-hardware/trainium.rst``, ``trn1-arch.rst``,
``nki/get-started/about/nki-dma-overview.rst``), as quoted in trainium-figures.md "Trainium (Trn1)".

The simulated ``neuron`` device is one logical NeuronCore; a chip exposes ``logical_cores`` of them
(LNC=2 grouping by default on Trn2, as TorchNeuron reports). Per-device figures are the chip's
divided by the logical cores.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

GiB = 1 << 30
MiB = 1 << 20


@dataclass(frozen=True)
class ChipSpec:
    """Published figures for one Trainium chip (per chip unless the name says otherwise)."""

    name: str
    long_name: str
    physical_cores: int
    logical_cores: int
    hbm_bytes: int  # torchneuron.md: Trn2 96 GiB, Trn3 144 GiB
    hbm_bandwidth: float  # bytes/s; Trn2 2.9 TB/s, Trn3 4.9 TB/s
    tflops_bf16: float  # dense BF16/FP16: Trn2 667, Trn3 671
    tflops_fp32: float  # FP32: Trn2 181, Trn3 183
    tflops_fp8: float  # FP8: Trn2 1299, Trn3 2517 (MXFP8)
    sbuf_bytes_per_core: int  # Trn2 28 MiB, Trn3 32 MiB
    psum_bytes_per_core: int  # 2 MiB on both
    # HBM the profiler's ProfileMode.DEVICE holds for hardware notifications: "approximately 5 GB of HBM on Trn2"
    # (Neuron docs, tools/neuron-explorer/how-to-profile-pytorch, 2026-10-26); per device (one neuron:N) assumed.
    # None where no figure is published (the simulator then reserves nothing and says so).
    profiler_device_mode_bytes: int | None = None
    # The network (the collective model's fabrics, distributed/commmodel.py). Trn2 defaults: trainium-figures.md A1/A4.
    dma_bytes_per_s_per_core: float = 368e9  # a NeuronCore's DMA, the intra-chip fabric (nki-dma-overview table)
    neuronlink_bytes_per_s: float = 1024e9  # chip to chip within an instance, per chip (trn2-arch.rst L97)
    chips_per_instance: int = 16  # trn2.48xlarge
    efa_bits_per_s: float = 3.2e12  # EFA per instance (trn2-arch.rst L103: 16 x 200 Gbps)
    logical_grouping: bool = True  # LNC=2 exists (Trn2, Trn3); NeuronCore-v2 has no logical-core grouping

    @property
    def lnc(self) -> int:
        """Physical cores per logical core (the LNC setting this spec stands for)."""
        return self.physical_cores // self.logical_cores

    @property
    def instance_ranks(self) -> int:
        """Logical cores (ranks) in one instance."""
        return self.logical_cores * self.chips_per_instance

    @property
    def device_hbm_bytes(self) -> int:
        """HBM visible to one logical core (one ``neuron:N`` device)."""
        return self.hbm_bytes // self.logical_cores

    @property
    def device_hbm_bandwidth(self) -> float:
        """HBM bandwidth share of one logical core, bytes/s."""
        return self.hbm_bandwidth / self.logical_cores

    def device_peak_flops(self, dtype: torch.dtype) -> float:
        """Peak FLOP/s of one logical core for ``dtype`` (integer and bool ops use the FP32 rate)."""
        if dtype in (torch.bfloat16, torch.float16):
            tflops = self.tflops_bf16
        elif dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
            tflops = self.tflops_fp8
        else:
            tflops = self.tflops_fp32
        return tflops * 1e12 / self.logical_cores


CHIPS: dict[str, ChipSpec] = {
    "trn2": ChipSpec(
        name="trn2",
        long_name="Trainium2",
        physical_cores=8,  # 8 x NeuronCore-v3
        logical_cores=4,  # LNC=2: a Trn2 chip shows 4 logical cores
        hbm_bytes=96 * GiB,
        hbm_bandwidth=2.9e12,
        tflops_bf16=667.0,
        tflops_fp32=181.0,
        tflops_fp8=1299.0,
        sbuf_bytes_per_core=28 * MiB,
        psum_bytes_per_core=2 * MiB,
        profiler_device_mode_bytes=5_000_000_000,
    ),
    "trn3": ChipSpec(
        name="trn3",
        long_name="Trainium3",
        physical_cores=8,  # 8 x NeuronCore-v4
        logical_cores=4,
        hbm_bytes=144 * GiB,
        hbm_bandwidth=4.9e12,
        tflops_bf16=671.0,
        tflops_fp32=183.0,
        tflops_fp8=2517.0,
        sbuf_bytes_per_core=32 * MiB,
        psum_bytes_per_core=2 * MiB,
        dma_bytes_per_s_per_core=528e9,  # nki-dma-overview table: 33 B/ns x 16 (A5)
        neuronlink_bytes_per_s=2048 * GiB,  # NeuronLink-v4 per device, trn3-arch table (A6; 2.56 TB/s elsewhere)
        efa_bits_per_s=3.2e12,  # Gen1 UltraServer: 12,800 Gbps over 4 servers of 16 chips (A6)
    ),
    # Trainium (NeuronCore-v2), the chip of Trn1/Trn1n and of the published training table (trainium.rst L14-40):
    # two NeuronCore-v2, 190 FP16/BF16/cFP8/TF32 TFLOPS (no FP8 speed-up), 47.5 FP32, 32 GiB HBM at 820 GiB/s.
    "trn1": ChipSpec(
        name="trn1",
        long_name="Trainium (trn1.32xlarge)",
        physical_cores=2,  # 2 x NeuronCore-v2
        logical_cores=2,  # no LNC grouping on NeuronCore-v2
        hbm_bytes=32 * GiB,
        hbm_bandwidth=820 * GiB,
        tflops_bf16=190.0,
        tflops_fp32=47.5,
        tflops_fp8=190.0,
        sbuf_bytes_per_core=24 * MiB,
        psum_bytes_per_core=2 * MiB,
        dma_bytes_per_s_per_core=272e9,  # nki-dma-overview table: Trainium1 17 B/ns x 16
        neuronlink_bytes_per_s=384 * GiB,  # trn1-arch.rst instance table, NeuronLink-v2 per device (header lost)
        chips_per_instance=16,  # trn1.32xlarge, a 2D torus (trn1-arch.rst L82)
        efa_bits_per_s=800e9,  # trn1-arch.rst instance table: trn1.32xlarge 800 Gbps
        logical_grouping=False,
    ),
}
# trn1n.32xlarge: the same chips, twice the NeuronLink-v2 and EFA bandwidth (trn1-arch.rst instance table).
CHIPS["trn1n"] = dataclasses.replace(
    CHIPS["trn1"],
    name="trn1n",
    long_name="Trainium (trn1n.32xlarge)",
    neuronlink_bytes_per_s=768 * GiB,
    efa_bits_per_s=1.6e12,
)


def get_chip_spec(name: str) -> ChipSpec:
    """Return the chip model named ``name``; raises ``ValueError`` listing the valid names."""
    key = name.strip().lower()
    aliases = {"trainium": "trn1", "trainium1": "trn1", "trainium2": "trn2", "trainium3": "trn3"}
    key = aliases.get(key, key)
    if key not in CHIPS:
        raise ValueError(f"unknown chip {name!r}; valid chips: {', '.join(sorted(CHIPS))}")
    return CHIPS[key]


def with_cores(spec: ChipSpec, logical_cores: int) -> ChipSpec:
    """Return ``spec`` with a different logical core count; raises ``ValueError`` if out of range."""
    if not 1 <= logical_cores <= spec.physical_cores:
        raise ValueError(f"cores must be between 1 and {spec.physical_cores} for {spec.long_name}")
    if not spec.logical_grouping and logical_cores != spec.physical_cores:
        raise ValueError(
            f"{spec.long_name} has no logical-core grouping (NeuronCore-v2): {spec.physical_cores} cores per chip, LNC=1"
        )
    return dataclasses.replace(spec, logical_cores=logical_cores)


# Inferentia2, used only by the model-level ledger's inf2 row (R17); not a `neuron` device choice.
# Source: aws-neuron-sdk about-neuron/arch/neuron-hardware/inferentia2.rst ("Each Inferentia2 chip"): the same
# two NeuronCore-v2 as Trainium (190 FP16/BF16/cFP8/TF32 TFLOPS, 47.5 FP32, 32 GiB HBM at 820 GiB/s).
INF2 = dataclasses.replace(CHIPS["trn1"], name="inf2", long_name="Inferentia2")
