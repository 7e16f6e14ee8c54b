"""The zoo's dry stage on one small card (CI): every stage runs under dryrun() and its figures hold together."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")

from trn_notebook.fidelity.configs import ModelSpec
from trn_notebook.zoo.__main__ import main
from trn_notebook.zoo.dry import CARDS, DRY_STAGES, DryCard, DryWorkload, card, chips_needed, run_card, select_cards
from trn_notebook.zoo.dry_table import BEGIN, END, dry_markdown, splice
from trn_notebook.zoo.specs import build, spec

QUICK_STAGES = ("forward", "train", "decode", "forward_compiled")
WORK = DryWorkload(batch=1, tokens=8, context=8)


def _tiny() -> ModelSpec:
    return ModelSpec("llama-tiny", "llama", dict(spec("llama").kwargs), "the zoo's tiny llama")


@pytest.fixture(scope="module")
def tiny_card() -> DryCard:
    return run_card(_tiny(), QUICK_STAGES, WORK)


def _check(stage: str, s) -> None:
    assert s.status == "pass", f"{stage}: {s.detail}"
    assert s.step_s > 0 and s.device_s > 0 and s.launches > 0 and s.ops > 0
    # the categories partition the allocated peak (the shape-only allocator's live blocks at that moment)
    assert sum(s.by_category.values()) == s.peak_allocated
    assert s.by_category["parameters"] > 0
    assert s.fits and s.capacity == 24 * 2**30  # trn2 96 GiB over 4 logical cores at LNC=2
    assert (s.graphs > 0) == stage.endswith("_compiled")


def test_dry_stage_on_a_small_card(tiny_card: DryCard) -> None:
    assert list(tiny_card.stages) == list(QUICK_STAGES)
    assert tiny_card.params == sum(p.numel() for p in build(spec("llama")).parameters())
    for stage, s in tiny_card.stages.items():
        _check(stage, s)
    st = tiny_card.stages
    assert "optimizer state" in st["train"].by_category and "optimizer state" not in st["forward"].by_category
    assert "gradients" in st["train"].by_category  # the step keeps its gradients: the peak names them
    assert st["train"].peak_phase in ("forward", "backward", "optimizer")
    # one decode token costs less modeled time than a forward over the whole sequence
    assert st["decode"].step_s < st["forward"].step_s


@pytest.mark.slow
@pytest.mark.parametrize("stage", [s for s in DRY_STAGES if s not in QUICK_STAGES])
def test_dry_stage_compiled_rest(stage: str) -> None:
    _check(stage, run_card(_tiny(), (stage,), WORK).stages[stage])


def test_docs_section_splices_in_place(tiny_card: DryCard, tmp_path) -> None:
    data = tmp_path / "dry.json"
    data.write_text(json.dumps([tiny_card.to_json()]))
    doc = tmp_path / "models.md"
    doc.write_text("# Model zoo\n\nthe tiny table\n")
    assert main(["--dry", "--from-json", str(data), "--out", str(doc)]) == 0
    once = doc.read_text()
    assert once.startswith("# Model zoo\n\nthe tiny table\n") and once.count(BEGIN) == 1 and END in once
    assert "### llama-tiny" in once and "forward (compiled)" in once and "not run" in once  # the quick subset
    assert main(["--dry", "--from-json", str(data), "--out", str(doc)]) == 0
    assert doc.read_text().count(BEGIN) == 1  # replaced, not appended again
    section = dry_markdown([tiny_card], "cmd")
    assert splice(once + "tail\n", section).endswith("tail\n")


def test_cards_are_the_published_five() -> None:
    assert [c.name for c in CARDS] == ["Llama-3.1-8B", "Llama-3.3-70B", "Mixtral-8x7B", "Qwen3-32B", "DeepSeek-V3"]
    assert card("Qwen3-32B").config().num_hidden_layers == 64
    assert [c.name for c in select_cards("llama*")] == ["Llama-3.1-8B", "Llama-3.3-70B"]
    with pytest.raises(ValueError, match="no full-size card"):
        select_cards("gpt9")
    assert chips_needed(97 * 2**30, 24 * 2**30) == 2 and chips_needed(96 * 2**30, 24 * 2**30) == 1
