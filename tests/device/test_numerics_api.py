"""The numerics policy's public API: set/restore, context manager, parsing, env var, status rows."""

from __future__ import annotations

import subprocess
import sys

import pytest

import trn_notebook
from trn_notebook import state
from trn_notebook.device.numerics.policy import ASSUMED, NumericsPolicy, parse_numerics


def test_default_is_exact_and_set_returns_previous() -> None:
    assert trn_notebook.numerics_policy().mode == "exact"
    previous = trn_notebook.set_numerics("trainium", autocast="matmult", autocast_type="fp16")
    try:
        policy = trn_notebook.numerics_policy()
        assert (policy.mode, policy.autocast, policy.autocast_type) == ("trainium", "matmult", "fp16")
        assert "matmult->fp16" in policy.label()
        assert policy.sourced() and all(src for _, src in policy.sourced())
        assert any("approximation error" in a for a in policy.assumed())
    finally:
        trn_notebook.set_numerics(**previous.to_dict())
    assert trn_notebook.numerics_policy() == previous


def test_context_manager_restores_and_reset_keeps_policy() -> None:
    with trn_notebook.numerics("trainium", stochastic_rounding=True, seed=7) as p:
        assert trn_notebook.numerics_policy() is p
        state.reset()
        assert trn_notebook.numerics_policy() is p  # a setting, like the chip
        assert state.owners()["numerics"].snapshot() is p
    assert trn_notebook.numerics_policy().mode == "exact"


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"mode": "fast"}, "mode='fast'"),
        ({"mode": "trainium", "autocast": "matmul"}, "'matmult'"),
        ({"mode": "trainium", "autocast_type": "fp8"}, "'fp8_e4m3'"),
        ({"mode": "trainium", "seed": -1}, "non-negative"),
        ({"mode": "trainium", "chip": "trn9"}, "trn2"),
    ],
)
def test_bad_values_raise_and_keep_policy(kwargs: dict[str, object], needle: str) -> None:
    before = trn_notebook.numerics_policy()
    with pytest.raises(ValueError, match=needle):
        trn_notebook.set_numerics(**kwargs)  # type: ignore[arg-type]
    assert trn_notebook.numerics_policy() is before


def test_parse_spec() -> None:
    p = parse_numerics("trainium, autocast=all, stochastic-rounding=on, seed=3, downcast_int64=0")
    assert p == NumericsPolicy("trainium", "all", "bf16", True, True, 3, False, None)
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_numerics("trainium,speed=11")
    with pytest.raises(ValueError, match="1/0"):
        parse_numerics("trainium,stochastic_rounding=maybe")


@pytest.mark.slow  # two fresh interpreters (~8 s under load)
def test_env_var_read_at_device_init() -> None:
    code = "import trn_notebook as t; print(t.numerics_policy().mode, t.numerics_policy().autocast)"
    env = {"TRN_NOTEBOOK_NUMERICS": "trainium,autocast=matmult", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["trainium", "matmult"], out.stderr
    env["TRN_NOTEBOOK_NUMERICS"] = "trainum"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["exact", "none"]
    assert "TRN_NOTEBOOK_NUMERICS='trainum' is not valid" in out.stderr


def test_status_shows_mode_and_assumed_parts() -> None:
    from trn_notebook.session.status_card import status

    assert [v for k, v in status().fields if k == "numerics (assumed)"] == [
        "exact mode: CPU PyTorch numerics, not a model of Trainium"
    ]
    with trn_notebook.numerics("trainium"):
        fields = status().fields
    assert dict(fields)["numerics"].startswith("trainium (auto-cast none")
    assumed = [v for k, v in fields if k == "numerics (assumed)"]
    assert len(assumed) == len(ASSUMED)
    assert any("approximation error" in str(a) for a in assumed)


def test_magic_device_numerics() -> None:
    import torch

    from trn_notebook.session.device import use_device

    try:
        card = use_device("neuron", numerics="trainium,autocast=matmult")
        assert trn_notebook.numerics_policy().autocast == "matmult"
        assert "matmult" in str(dict(card.fields)["numerics"])
        with pytest.raises(ValueError, match="autocast"):
            use_device("neuron", numerics="trainium,autocast=sometimes")
        assert trn_notebook.numerics_policy().autocast == "matmult"  # a bad spec changes nothing
    finally:
        trn_notebook.set_numerics("exact")
        torch.set_default_device("cpu")


def test_the_top_level_ratio_stays_the_function_after_its_module_is_imported():
    import trn_notebook
    import trn_notebook.aws_ratio
    import trn_notebook.numerics_compare

    assert callable(trn_notebook.numerics_ratio) and trn_notebook.numerics_ratio.__name__ == "numerics_ratio"
