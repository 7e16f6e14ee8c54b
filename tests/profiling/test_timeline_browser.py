"""The timeline widget in a real browser: it draws, zoom reaches Python, a click shows the event's source."""

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
    run_command,
    start_jupyterlab,
    stop_jupyterlab,
    wait_cells_done,
    write_notebook,
)

pytest.importorskip("playwright")
from playwright.sync_api import Page, sync_playwright

pytestmark = [pytest.mark.browser, pytest.mark.slow, needs_chromium]

SETUP = """
import json, torch, trn_notebook
x = torch.randn(64, 64, device="neuron")
with trn_notebook.profile() as result:
    for _ in range(20):
        y = (x @ x).relu()  # THE_LINE
    y.sum().item()
w = result.widget()
lane = w.lanes.index("device: eager ops")
ev = max((e for e in w.events if e[1] == lane and e[4] == "aten::mm"), key=lambda e: e[3])
print("FIGURES " + json.dumps({"ev": ev, "window": w.window, "total": w.total_events}))
"""
SHOW = "w"
AFTER = 'print("WINDOW " + json.dumps(w.window))'


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp("timeline-lab")
    url, process = start_jupyterlab(root)
    try:
        yield url, root
    finally:
        stop_jupyterlab(process)


def cell_output(page: Page, index: int) -> str:
    return page.evaluate(
        "(i) => window.jupyterapp.shell.currentWidget.content.widgets[i].node.querySelector('.jp-OutputArea')"
        "?.innerText ?? ''",
        index,
    )


def test_timeline_draws_zooms_and_shows_source_on_click(lab: tuple[str, Path]) -> None:
    url, root = lab
    write_notebook(root / "timeline.ipynb", [SETUP, SHOW, AFTER])
    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        open_notebook(page, url, "timeline.ipynb")
        run_all_cells(page, timeout=120_000)
        figures = json.loads(re.search(r"FIGURES (\{.*\})", cell_output(page, 0)).group(1))
        widget = page.locator(".trn-timeline-widget").first
        widget.wait_for(timeout=30_000)
        info = widget.locator(".trn-label").first
        assert f"{figures['total']} events" in info.inner_text()
        canvas = widget.locator("canvas").first
        box = canvas.bounding_box()
        assert box is not None and box["width"] >= 480
        # click the longest aten::mm: x from the same mapping the view uses
        ev, (a, b) = figures["ev"], figures["window"]
        label_w, lane_h = 170, 20
        width = page.evaluate("(c) => c.width", canvas.element_handle())
        x = label_w + ((ev[2] + ev[3] / 2 - a) / (b - a)) * (width - label_w - 4)
        y = ev[1] * lane_h + lane_h / 2
        canvas.click(position={"x": x, "y": y})
        detail = widget.locator(".trn-timeline-detail")
        page.wait_for_function("(n) => n.innerText.includes('aten::mm')", arg=detail.element_handle(), timeout=15_000)
        text = detail.inner_text()
        assert "THE_LINE" in text and "shapes" in text and "[64,64]" in text.replace(" ", "")
        # zoom in with the wheel: the new window reaches Python
        canvas.hover(position={"x": box["width"] / 2, "y": 10})
        for _ in range(5):
            page.mouse.wheel(0, -200)
        page.wait_for_timeout(800)
        page.evaluate("() => { window.jupyterapp.shell.currentWidget.content.activeCellIndex = 2; }")
        run_command(page, "notebook:run-cell")
        wait_cells_done(page)
        window = json.loads(re.search(r"WINDOW (\[.*\])", cell_output(page, 2)).group(1))
        assert window[1] - window[0] < (b - a) * 0.6, window
        assert not errors, errors
        browser.close()
