"""Truth of the dry figures: for zoo models at tiny size, a dry run charges exactly what a real run does."""

from __future__ import annotations

import pytest
import torch

from trn_notebook.zoo.specs import build, make_inputs, spec

from .truth import real_and_dry

pytestmark = pytest.mark.slow  # builds transformers models (the import alone takes seconds)


def _forward(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> None:
    model.eval()
    with torch.no_grad():
        model(**inputs)


def _train_step(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> None:
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    out = model(**inputs)
    out.loss.backward()
    opt.step()
    opt.zero_grad()


@pytest.mark.parametrize("name", ["gpt2", "t5", "vit"])
def test_forward_dry_equals_real(name: str) -> None:
    s = spec(name)
    model = build(s)
    real, dry = real_and_dry(model, make_inputs(s, model, labels=True), _forward)
    assert dry == real


def test_training_step_dry_equals_real() -> None:
    s = spec("llama")
    model = build(s)
    real, dry = real_and_dry(model, make_inputs(s, model, labels=True), _train_step)
    assert dry == real
