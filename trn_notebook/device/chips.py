"""Chip models of Trainium2 and Trainium3, from shared/reference/torchneuron.md (Hardware table).

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
    ),
}


def get_chip_spec(name: str) -> ChipSpec:
    """Return the chip model named ``name``; raises ``ValueError`` listing the valid names."""
    key = name.strip().lower()
    aliases = {"trainium2": "trn2", "trainium3": "trn3"}
    key = aliases.get(key, key)
    if key not in CHIPS:
        raise ValueError(f"unknown chip {name!r}; valid chips: {', '.join(sorted(CHIPS))}")
    return CHIPS[key]


def with_cores(spec: ChipSpec, logical_cores: int) -> ChipSpec:
    """Return ``spec`` with a different logical core count; raises ``ValueError`` if out of range."""
    if not 1 <= logical_cores <= spec.physical_cores:
        raise ValueError(f"cores must be between 1 and {spec.physical_cores} for {spec.long_name}")
    return dataclasses.replace(spec, logical_cores=logical_cores)


# Inferentia2, used only by the model-level ledger's inf2 row (R17); not a `neuron` device choice.
# Source: aws-neuron-sdk about-neuron/arch/neuron-hardware/inferentia2.rst ("Each Inferentia2 chip"):
# two NeuronCore-v2, 190 FP16/BF16/cFP8/TF32 TFLOPS, 47.5 FP32 TFLOPS, 32 GiB HBM at 820 GiB/s.
INF2 = ChipSpec(
    name="inf2",
    long_name="Inferentia2",
    physical_cores=2,
    logical_cores=2,
    hbm_bytes=32 * GiB,
    hbm_bandwidth=820 * GiB,
    tflops_bf16=190.0,
    tflops_fp32=47.5,
    tflops_fp8=190.0,
    sbuf_bytes_per_core=24 * MiB,  # NeuronCore-v2 (trainium-figures.md A3 / fidelity.md Trn1 core)
    psum_bytes_per_core=2 * MiB,
)
