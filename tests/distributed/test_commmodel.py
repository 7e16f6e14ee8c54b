"""The α–β model of collectives: formulas, algorithm choice, overrides, the comm queue on the clock."""

from __future__ import annotations

import pytest

from trn_notebook.device import clocks
from trn_notebook.device.trace.lanes import BY_KEY
from trn_notebook.distributed import (
    collective_seconds,
    exposed_comm,
    get_comm_constants,
    reset_comm_constants,
    set_comm_constants,
)


@pytest.fixture(autouse=True)
def _defaults():
    reset_comm_constants()
    yield
    reset_comm_constants()


def test_ring_all_reduce_is_alpha_beta_formula():
    c = get_comm_constants()
    n, s = 4, 256 * 10**6
    t, algo, fabric = collective_seconds("all_reduce", s, n, algorithm="ring")
    expected = c.launch_s + 2 * (n - 1) * c.alpha_intra_chip_s + 2 * (n - 1) / n * s / c.beta_intra_chip
    assert (algo, fabric) == ("ring", "intra_chip")
    assert t == pytest.approx(expected)


def test_all_gather_costs_half_an_all_reduce_in_bandwidth():
    s = 10**9
    ar, _, _ = collective_seconds("all_reduce", s, 8, algorithm="ring")
    ag, _, _ = collective_seconds("all_gather", s, 8, algorithm="ring")
    launch = get_comm_constants().launch_s
    assert (ag - launch) == pytest.approx((ar - launch) / 2)


def test_algorithm_switch_points_and_fabrics():
    assert collective_seconds("all_reduce", 1000, 2)[1] == "mesh"
    assert collective_seconds("all_reduce", 10 * 10**6, 2)[1] == "rdh"
    assert collective_seconds("all_reduce", 100 * 10**6, 2)[1] == "ring"
    assert collective_seconds("all_reduce", 1000, 2)[2] == "intra_chip"
    assert collective_seconds("all_reduce", 1000, 32)[2] == "neuronlink"
    assert collective_seconds("all_reduce", 1000, 128)[2] == "efa"
    slow = collective_seconds("all_reduce", 10**8, 2, fabric="efa")[0]
    fast = collective_seconds("all_reduce", 10**8, 2, fabric="neuronlink")[0]
    assert slow > 10 * fast


def test_two_rank_small_all_reduce_matches_the_published_floor():
    t, _, _ = collective_seconds("all_reduce", 4, 2)
    assert t == pytest.approx(58e-6, rel=0.05)  # trainium-figures.md D3: ≈58 µs on 2 ranks


def test_constants_are_overridable_and_unknown_names_are_refused():
    before = collective_seconds("all_reduce", 10**8, 2)[0]
    set_comm_constants(beta_intra_chip=get_comm_constants().beta_intra_chip / 2)
    assert collective_seconds("all_reduce", 10**8, 2)[0] > before
    with pytest.raises(TypeError, match="valid"):
        set_comm_constants(bandwidth=1)
    with pytest.raises(ValueError, match="unknown collective"):
        collective_seconds("allreduce", 1, 2)


def test_async_collective_overlaps_compute_and_blocking_one_is_exposed(fresh_device):
    clocks.launch("matmul", 1e-3, 0.0, 0.0)
    clocks.collective("all_reduce", 2e-3, 0.0, blocking=False)
    clocks.launch("matmul", 1e-3, 0.0, 0.0)  # runs alongside the collective
    comm, exposed = exposed_comm()
    assert comm == pytest.approx(2e-3)
    assert exposed == pytest.approx(1e-3)  # 1 ms of the 2 ms is hidden behind the second matmul
    clocks.sync("item")
    assert clocks.snapshot().device_free_at_s == pytest.approx(3e-3)
    clocks.collective("all_reduce", 1e-3, 0.0, blocking=True)
    clocks.launch("matmul", 1e-3, 0.0, 0.0)
    assert clocks.snapshot().device_free_at_s == pytest.approx(5e-3)  # compute waited for it
    trace = clocks.chrome_trace()["traceEvents"]
    assert {e["tid"] for e in trace if e.get("cat") == "comm"} == {BY_KEY["comm"].tid}  # the collectives lane


def test_model_crossovers_sit_at_the_documented_switch_points_on_16_ranks():
    def best(nbytes):
        times = {a: collective_seconds("all_reduce", nbytes, 16, algorithm=a)[0] for a in ("ring", "mesh", "rdh")}
        return min(times, key=times.get)

    assert best(500_000) == "mesh" and best(2_000_000) == "rdh"
    assert best(50_000_000) == "rdh" and best(60_000_000) == "ring"
    assert [collective_seconds("all_reduce", s, 16)[1] for s in (500_000, 2_000_000, 60_000_000)] == [
        "mesh",
        "rdh",
        "ring",
    ]


def test_the_defaults_are_trn2s_network_at_lnc2() -> None:
    from trn_notebook.device.chips import CHIPS
    from trn_notebook.distributed.commmodel import CommConstants, constants_for

    assert constants_for(CHIPS["trn2"], CommConstants()) == CommConstants()
    assert CommConstants().beta_efa == pytest.approx(50e9 / 8)  # 50 Gbps per rank (collectives.rst L110)


def test_the_network_follows_the_chip_the_device_models(fresh_device) -> None:
    from trn_notebook.device.memory import runtime

    trn2_efa = collective_seconds("all_reduce", 10**8, 1024)[0]
    runtime.set_chip("trn1")
    try:
        c = get_comm_constants()
        assert (c.chip, c.cores_per_chip, c.chips_per_node) == ("trn1", 2, 16)
        assert c.beta_efa == pytest.approx(800e9 / 8 / 32)  # trn1.32xlarge: 800 Gbps over 32 ranks
        assert fabric_of(64) == "efa" and fabric_of(32) == "neuronlink" and fabric_of(2) == "intra_chip"
        assert collective_seconds("all_reduce", 10**8, 1024)[0] > trn2_efa  # 25 Gbps a rank, not 50
        set_comm_constants(alpha_efa_s=20e-6)  # a setting survives on the other chip's network
        assert get_comm_constants().alpha_efa_s == 20e-6 and get_comm_constants().chip == "trn1"
    finally:
        runtime.set_chip("trn2")
    assert get_comm_constants().chip == "trn2"


def fabric_of(n: int) -> str:
    from trn_notebook.distributed.commmodel import fabric_for

    return fabric_for(n)
