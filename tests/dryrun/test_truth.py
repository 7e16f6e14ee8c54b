"""Truth of the dry figures: for zoo models at tiny size, a dry run charges exactly what a real run does."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from trn_notebook.zoo.specs import build, make_inputs, spec

from .truth import real_and_dry

# The real run's allocator figures count every live device tensor, and earlier tests of a session leave
# some (dynamo keeps example values of failed compiles); so the comparisons run in a fresh process.
ISOLATED = os.environ.get("TRN_TRUTH_ISOLATED") == "1"
pytestmark = pytest.mark.slow  # builds transformers models (the import alone takes seconds)
in_fresh_process = pytest.mark.skipif(not ISOLATED, reason="runs in the fresh process of test_truth_in_a_fresh_process")


@pytest.mark.skipif(ISOLATED, reason="the outer run")
def test_truth_in_a_fresh_process() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", __file__],
        env={**os.environ, "TRN_TRUTH_ISOLATED": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "6 passed" in proc.stdout, proc.stdout[-2000:]


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
