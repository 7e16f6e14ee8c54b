"""The chip models: Trainium (Trn1/Trn1n) beside Trainium2/3, each figure as its source prints it."""

from __future__ import annotations

import pytest
import torch

from trn_notebook.device.chips import CHIPS, INF2, GiB, get_chip_spec, with_cores


def test_trn1_is_two_neuroncore_v2_at_the_published_rates() -> None:
    trn1 = get_chip_spec("Trainium")
    assert trn1.name == "trn1" and (trn1.physical_cores, trn1.logical_cores, trn1.lnc) == (2, 2, 1)
    assert trn1.device_hbm_bytes == 16 * GiB  # 32 GiB per chip, 16 per core
    assert trn1.device_peak_flops(torch.bfloat16) == pytest.approx(95e12)  # 190 TFLOPS per chip
    assert trn1.device_peak_flops(torch.float8_e4m3fn) == trn1.device_peak_flops(torch.bfloat16)  # no FP8 gain
    assert trn1.device_peak_flops(torch.float32) == pytest.approx(23.75e12)
    assert trn1.instance_ranks == 32  # 16 chips x 2 cores in trn1.32xlarge


def test_trn1n_differs_from_trn1_only_in_its_network() -> None:
    trn1, trn1n = CHIPS["trn1"], CHIPS["trn1n"]
    assert trn1n.neuronlink_bytes_per_s == 2 * trn1.neuronlink_bytes_per_s
    assert trn1n.efa_bits_per_s == 2 * trn1.efa_bits_per_s == 1.6e12
    same = ("physical_cores", "hbm_bytes", "hbm_bandwidth", "tflops_bf16", "tflops_fp32", "dma_bytes_per_s_per_core")
    assert all(getattr(trn1, f) == getattr(trn1n, f) for f in same)


def test_inferentia2_shares_the_neuroncore_v2_figures() -> None:
    assert (INF2.tflops_bf16, INF2.hbm_bytes, INF2.hbm_bandwidth) == (190.0, 32 * GiB, 820 * GiB)


def test_trn1_has_no_logical_core_grouping() -> None:
    with pytest.raises(ValueError, match="no logical-core grouping"):
        with_cores(CHIPS["trn1"], 1)
    assert with_cores(CHIPS["trn2"], 8).lnc == 1  # Trn2 at LNC=1


def test_an_unknown_chip_names_every_chip() -> None:
    with pytest.raises(ValueError, match="trn1, trn1n, trn2, trn3"):
        get_chip_spec("trn9")
