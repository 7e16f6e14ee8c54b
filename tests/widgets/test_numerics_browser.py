"""NumericsView in a real browser (issue 27): the per-module ratio curve, the threshold line, the first crossing
and the heat map a click selects, all as Python computed them; a hostile module name stays text."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser_utils import (
    launch_chromium,
    needs_chromium,
    open_notebook,
    run_all_cells,
    start_jupyterlab,
    stop_jupyterlab,
    write_notebook,
)

pytest.importorskip("playwright")
from playwright.sync_api import expect, sync_playwright

pytestmark = [pytest.mark.browser, pytest.mark.slow, needs_chromium]

HOSTILE = "<img src=x onerror=__pwned=1>"  # no dot: a valid nn.Module child name

SETUP = f"""
import json, torch
from torch import nn
import trn_notebook
from trn_notebook.widgets import NumericsView

class OffsetProjection(nn.Module):  # notebook 14's sensitive layer: a large offset cancelled after a matmul
    def __init__(self, d, offset=512.0):
        super().__init__()
        self.proj = nn.Linear(d, d, bias=False)
        self.offset = offset

    def forward(self, x):
        w = self.proj.weight.float()
        h = x.float() + self.offset
        return (h @ w.t() - self.offset * w.sum(dim=1)).to(x.dtype)

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.GELU())
model.add_module({HOSTILE!r}, OffsetProjection(32))
model.add_module("head", nn.Linear(32, 8))
x = torch.randn(4, 16)
result = trn_notebook.compare_numerics(model, x, numerics={{"mode": "trainium", "autocast": "matmult"}})
rows = result.rows
print("FIGURES " + json.dumps({{
    "n": len(rows),
    "crossing": [r.index for r in rows if r.crosses(result.threshold)],
    "first": result.first.index if result.first is not None else -1,
    "first_module": result.first.module if result.first is not None else "",
    "module0": rows[0].module,
    "threshold": result.threshold,
    "heat0": [result.heatmaps[rows[0].key].rows, result.heatmaps[rows[0].key].cols],
}}))
"""
SHOW = "NumericsView(result)"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp("numerics-lab")
    url, process = start_jupyterlab(root)
    try:
        yield url, root
    finally:
        stop_jupyterlab(process)


def test_numerics_view_draws_the_curve_python_computed_and_a_click_selects_a_heat_map(lab: tuple[str, Path]) -> None:
    url, root = lab
    write_notebook(root / "numerics.ipynb", [SETUP, SHOW])
    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            open_notebook(page, url, "numerics.ipynb")
            run_all_cells(page, timeout=180_000)
            text = page.evaluate(
                """() => window.jupyterapp.shell.currentWidget.content.widgets[0].node
                         .querySelector('.jp-OutputArea')?.innerText ?? ''"""
            )
            match = re.search(r"FIGURES (\{.*\})", text)
            assert match, f"no figures printed: {text[:2000]!r}"
            fig = json.loads(match.group(1))
            assert fig["first"] >= 0 and fig["crossing"], "the sensitive layer must cross the threshold under matmult"

            view = page.locator(".trn-numerics").first
            points = view.locator("svg circle")
            expect(points).to_have_count(fig["n"], timeout=60_000)
            red = view.locator('svg circle[fill="#c62828"]')
            expect(red).to_have_count(len(fig["crossing"]))
            expect(view.locator("svg text", has_text=f"threshold {fig['threshold']:g}")).to_have_count(1)
            # The first crossing is selected on load, and its heat map is the one shown.
            expect(view.locator(".trn-label", has_text=fig["first_module"]).last).to_be_visible()
            # The hostile module name reached the page as text, never as markup.
            assert HOSTILE in view.evaluate("(node) => node.textContent")
            assert view.locator("img").count() == 0 and page.evaluate("window.__pwned") is None

            points.nth(0).click()  # select module call 0: Python sends its heat map
            label = view.locator(".trn-label", has_text="|neuron - FP32|")
            expect(label).to_contain_text(re.compile(rf"^{re.escape(fig['module0'])} "), timeout=30_000)
            rows, cols = fig["heat0"]
            expect(view.locator("svg rect")).to_have_count(rows * cols)
            assert not errors, errors
        finally:
            browser.close()
