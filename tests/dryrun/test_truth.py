"""Truth of the dry figures: for zoo models at tiny size, a dry run charges exactly what a real run does."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from trn_notebook.zoo.dry import DRY_DIFFERENCES
from trn_notebook.zoo.specs import QUICK, SPECS, build, make_inputs, spec

from .truth import real_and_dry

# The real run's allocator figures count every live device tensor, and earlier tests of a session leave
# some (dynamo keeps example values of failed compiles); so the comparisons run in a fresh process.
ISOLATED = os.environ.get("TRN_TRUTH_ISOLATED") == "1"
WHOLE_ZOO = os.environ.get("TRN_TRUTH_ALL") == "1"  # every zoo model and stage (~30 min here; by hand, not in CI)
pytestmark = pytest.mark.slow  # builds transformers models (the import alone takes seconds)
in_fresh_process = pytest.mark.skipif(not ISOLATED, reason="runs in the fresh process of test_truth_in_a_fresh_process")


def _inner(selection: str, whole: bool) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__, "-k", selection],
        env={**os.environ, "TRN_TRUTH_ISOLATED": "1", "TRN_TRUTH_ALL": "1" if whole else "0"},
        capture_output=True,
        text=True,
        timeout=5400 if whole else 600,
    )


@pytest.mark.skipif(ISOLATED, reason="the outer run")
def test_truth_in_a_fresh_process() -> None:
    proc = _inner("not zoo_stage or quick", whole=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert f"{6 + len(QUICK_CASES)} passed" in proc.stdout, proc.stdout[-2000:]


@pytest.mark.skipif(ISOLATED or not WHOLE_ZOO, reason="the whole zoo: set TRN_TRUTH_ALL=1 (run by hand)")
def test_truth_whole_zoo_in_a_fresh_process() -> None:
    proc = _inner("zoo_stage", whole=True)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]


def _forward(model: torch.nn.Module, inputs: dict[str, torch.Tensor], compiled: bool = False) -> None:
    model.eval()
    with torch.no_grad():
        (torch.compile(model, backend="neuron") if compiled else model)(**inputs)


def _train_step(model: torch.nn.Module, inputs: dict[str, torch.Tensor], compiled: bool = False) -> None:
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    out = (torch.compile(model, backend="neuron") if compiled else model)(**inputs)
    out.loss.backward()
    opt.step()
    opt.zero_grad()


def _compiled_forward(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> None:
    _forward(model, inputs, compiled=True)


def _compiled_train_step(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> None:
    _train_step(model, inputs, compiled=True)


@in_fresh_process
@pytest.mark.parametrize("name", ["gpt2", "t5", "vit"])
def test_forward_dry_equals_real(name: str) -> None:
    s = spec(name)
    model = build(s)
    real, dry = real_and_dry(model, make_inputs(s, model, labels=True), _forward)
    assert dry == real


@in_fresh_process
def test_training_step_dry_equals_real() -> None:
    s = spec("llama")
    model = build(s)
    real, dry = real_and_dry(model, make_inputs(s, model, labels=True), _train_step)
    assert dry == real


@in_fresh_process
def test_compiled_forward_dry_equals_real() -> None:
    """torch.compile under dryrun() compiles for real and charges each graph's schedule as a real run does."""
    s = spec("gpt2")
    model = build(s)
    real, dry = real_and_dry(model, make_inputs(s, model, labels=True), _compiled_forward)
    assert any(op.startswith("graph:") for op in real["ops"]), real["ops"]
    assert dry == real


@in_fresh_process
def test_compiled_training_step_dry_equals_real() -> None:
    s = spec("llama")
    model = build(s)
    real, dry = real_and_dry(model, make_inputs(s, model, labels=True), _compiled_train_step)
    assert sum(op.startswith("graph:") for op in real["ops"]) >= 2, real["ops"]  # forward and backward graphs
    assert dry == real


WORKLOADS = {"forward": _forward, "train": _train_step, "compiled_forward": _compiled_forward,
             "compiled_train": _compiled_train_step}  # fmt: skip
# CI's share (a suite under 12 minutes on 2 cores): each quick model once, forward and training alternating;
# every model and stage with TRN_TRUTH_ALL=1
QUICK_CASES = [(n, ("forward", "train")[i % 2]) for i, n in enumerate(QUICK)]
# the whole zoo only when asked for (TRN_TRUTH_ALL=1), so CI neither runs nor lists ~240 skipped cases
CASES = [(s.name, w) for s in SPECS for w in WORKLOADS] if WHOLE_ZOO else list(QUICK_CASES)


def _case_id(case: tuple[str, str]) -> str:
    return f"{case[0]}-{case[1]}" + ("-quick" if case in QUICK_CASES else "")


@in_fresh_process
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_zoo_stage_dry_equals_real(case: tuple[str, str]) -> None:
    """Every zoo model and stage: the dry figures are the real ones, or differ for the reason listed in
    trn_notebook.zoo.dry.DRY_DIFFERENCES (asserted to differ still, so a fixed one must leave the list)."""
    name, work = case
    why = DRY_DIFFERENCES.get((name, work)) or DRY_DIFFERENCES.get((name, "*"))
    s = spec(name)
    model = build(s)
    try:
        real, dry = real_and_dry(model, make_inputs(s, model, labels=True), WORKLOADS[work])
    except Exception as exc:
        assert why, f"{name} {work}: {type(exc).__name__}: {exc}"  # only a listed model may fail to run dry
        return
    if why:
        assert dry != real, f"{name} {work}: listed as differing ({why}) but dry == real: remove it from the list"
        return
    assert dry == real
