"""Widgets in a real browser: JupyterLab on 127.0.0.1 and Debian Chromium driven by Playwright.

One notebook opens the dashboard; the test checks each tab shows the figures Python computed,
moves the shape tuner's controls, sees the read-outs change, presses Apply, and checks (in a
later cell) that the bucketed callable's policy changed. A screenshot goes to a temp dir.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
from playwright.sync_api import Page, expect, sync_playwright

from trn_notebook.display.format import fmt_bytes
from trn_notebook.widgets.tuner import controls_spec

pytestmark = [pytest.mark.browser, pytest.mark.slow, needs_chromium]

HOSTILE = '<img src=x onerror="window.__pwned=1">'

SETUP = f"""
HOSTILE = {HOSTILE!r}
import json, torch, trn_notebook
import trn_notebook.compiler as compiler
from trn_notebook.widgets import Dashboard
x = torch.randn(64, 64, device="neuron")
y = (x @ x).relu()
s = torch.sort(y, dim=1)
# A hostile op name in the placement log: the view must show it as text, never run it.
trn_notebook.device.placement.placement_log.record(HOSTILE, "cpu_fallback", 1e-3, 0.0)
HAVE_TUNER = all(hasattr(compiler, n) for n in ("bucketed", "BucketPolicy", "tune", "shape_log"))
if HAVE_TUNER:
    import numpy as np
    lengths = np.random.default_rng(0).integers(20, 500, size=60)
    target = compiler.bucketed(lambda input_ids: input_ids * 2, dims={{"input_ids": 1}},
                               policy=compiler.BucketPolicy.pow2(32, 512))
    for n in lengths:
        target(torch.ones(1, int(n), device="neuron"))
"""

SHOW = "dash = Dashboard()\ndash"

# Cell 3 (after FIGURES): allocates for ~3 s, so the live memory timeline must move while it runs.
ALLOCATE = """
import time
keep = []
for i in range(30):
    keep.append(torch.empty(1 << 16, device="neuron"))
    time.sleep(0.1)
del keep
"""

BIG_TUNER = """
import numpy as np
from trn_notebook.widgets import ShapeTuner
big = ShapeTuner(lengths=np.random.default_rng(1).integers(16, 4097, size=100_000))
big
"""

# Moves the `count` slider of the index-th tuner ten times; each move waits for Python's new candidate.
MOVE_COUNT = """async (index) => {
    const root = document.querySelectorAll('.trn-tuner')[index];
    const input = root.querySelector('input.trn-count');
    const policy = root.querySelector('.trn-policy');
    const times = [];
    for (const v of [5, 9, 3, 12, 7, 16, 4, 10, 6, 14]) {
        const before = policy.textContent;
        const t0 = performance.now();
        input.value = String(v);
        input.dispatchEvent(new Event('input', {bubbles: true}));
        await new Promise((resolve, reject) => {
            const give_up = setTimeout(() => reject(new Error('no new candidate for count ' + v)), 10000);
            const check = () => {
                if (policy.textContent !== before) { clearTimeout(give_up); resolve(); }
                else requestAnimationFrame(check);
            };
            check();
        });
        times.push(performance.now() - t0);
    }
    return times;
}"""

FIGURES = """
print("FIGURES " + json.dumps({
    "fallback_pct": round(dash.placement.totals["fallback_pct"], 1),
    "ops": dash.placement.totals["ops"],
    "allocated": dash.memory.counters["allocated"],
    "graphs": len(dash.cache.graphs),
    "have_tuner": HAVE_TUNER,
    "policy": str(target.policy) if HAVE_TUNER else None,
    "candidate": dash.shapes.policy,
    "compiles": dash.shapes.readouts.get("compiles"),
}))
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp("widgets-lab")
    url, process = start_jupyterlab(root, env={"TORCH_NEURONX_NEFF_CACHE_DIR": str(root / "neff-cache")})
    try:
        yield url, root
    finally:
        stop_jupyterlab(process)


def cell_output(page: Page, index: int) -> str:
    return page.evaluate(
        """(i) => {
            const panel = window.jupyterapp.shell.currentWidget;
            return panel.content.widgets[i].node.querySelector('.jp-OutputArea')?.innerText ?? '';
        }""",
        index,
    )


def figures(page: Page) -> dict[str, Any]:
    text = cell_output(page, 2)
    match = re.search(r"FIGURES (\{.*\})", text)
    assert match, f"no figures printed; output was: {text!r}"
    return json.loads(match.group(1))


def run_cell(page: Page, index: int) -> None:
    page.evaluate("(i) => { window.jupyterapp.shell.currentWidget.content.activeCellIndex = i; }", index)
    run_command(page, "notebook:run-cell")
    wait_cells_done(page)


def set_range(page: Page, selector: str, value: int) -> None:
    """Move a range input as a drag does: set the value and fire ``input``."""
    page.locator(selector).first.evaluate(
        "(node, v) => { node.value = String(v); node.dispatchEvent(new Event('input', {bubbles: true})); }", value
    )


def tab(page: Page, title: str) -> None:
    page.locator(".trn-dashboard .lm-TabBar-tab", has_text=title).first.click()


def test_dashboard_renders_figures_and_tuner_applies_policy(lab: tuple[str, Path]) -> None:
    url, root = lab
    write_notebook(root / "dashboard.ipynb", [SETUP, SHOW, FIGURES, ALLOCATE, BIG_TUNER])
    shots = Path(tempfile.mkdtemp(prefix="trn-widgets-shots-"))
    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            open_notebook(page, url, "dashboard.ipynb")
            run_all_cells(page, timeout=120_000)
            fig = figures(page)

            # Placement tab (shown first): the fallback share and a fallback row coloured as one.
            placement = page.locator(".trn-placement").first
            expect(placement.locator(".trn-summary")).to_have_text(
                re.compile(re.escape(f"{fig['fallback_pct']:.1f}% of modeled time spent in CPU fallbacks")),
                timeout=30_000,
            )
            sort_row = placement.locator('tr[data-op="sort"]')
            expect(sort_row).to_have_class(re.compile("trn-cat-cpu_fallback"))
            assert placement.locator("tbody tr").count() == fig["ops"]
            hostile = placement.locator("tbody tr td.trn-col-op", has_text=HOSTILE)
            expect(hostile).to_have_count(1)  # shown as text
            assert placement.locator("tbody img").count() == 0
            assert page.evaluate("window.__pwned") is None
            page.screenshot(path=str(shots / "placement.png"))
            placement.locator("th", has_text="calls").click()  # sort by calls, done in Python
            expect(placement.locator("th", has_text="calls")).to_contain_text("▼")

            # Memory tab: the allocated card shows the allocator's figure; the timeline is drawn.
            tab(page, "Memory")
            memory = page.locator(".trn-memory").first
            expect(memory.locator('.trn-card[data-key="allocated"] .trn-v')).to_have_text(fmt_bytes(fig["allocated"]))
            expect(memory.locator("path.trn-series-allocated")).to_have_count(1)
            # Live: while a cell allocates, new samples arrive and are drawn before the cell ends.
            before = int(memory.locator("svg.trn-timeline").get_attribute("data-points"))
            page.evaluate(
                """() => {
                    const panel = window.jupyterapp.shell.currentWidget;
                    panel.content.activeCellIndex = 3;
                    window.jupyterapp.commands.execute('notebook:run-cell');
                }"""
            )
            page.wait_for_function(
                """(before) => {
                    const chart = document.querySelector('.trn-memory svg.trn-timeline');
                    const prompts = window.jupyterapp.shell.currentWidget.node.querySelectorAll('.jp-InputArea-prompt');
                    const busy = [...prompts].some((p) => p.textContent.includes('*'));
                    return busy && Number(chart.dataset.points) > before + 5;
                }""",
                arg=before,
                timeout=20_000,
            )
            wait_cells_done(page)
            page.screenshot(path=str(shots / "memory.png"))

            # Compile cache tab: one row per compiled graph.
            tab(page, "Compile cache")
            cache = page.locator(".trn-cache").first
            expect(cache.locator("tr.trn-graph")).to_have_count(fig["graphs"])

            assert fig["have_tuner"], "trn_notebook.compiler lacks bucketed/BucketPolicy/tune/shape_log"

            # Clearing the cache asks first, in the page; then the entries are gone.
            entries = re.search(r"(\d+) entr(?:y|ies) on disk", cache.locator(".trn-summary").inner_text())
            assert entries and int(entries.group(1)) > 0
            cache.locator("button.trn-clear").click()
            expect(cache.locator(".trn-confirm")).to_contain_text(f"Delete {entries.group(1)} entries in")
            cache.locator("button.trn-yes").click()
            expect(cache.locator(".trn-status")).to_contain_text(f"removed {entries.group(1)} cache entries")
            expect(cache.locator(".trn-summary")).to_contain_text("0 entries on disk")
            page.screenshot(path=str(shots / "cache.png"))
            assert not any((root / "neff-cache").glob("*/*.json"))

            # Shapes tab: histogram and buckets drawn; moving the controls changes the read-outs.
            tab(page, "Shapes")
            tuner = page.locator(".trn-tuner").first
            expect(tuner.locator("rect.trn-bin").first).to_be_visible()
            assert tuner.locator("line.trn-bucket").count() > 0
            compiles_card = tuner.locator('.trn-card[data-key="compiles"] .trn-v')
            expect(compiles_card).to_have_text(str(fig["compiles"]))
            tuner.locator("select.trn-kind").select_option("step")
            set_range(page, ".trn-tuner input.trn-min_len", 32)
            set_range(page, ".trn-tuner input.trn-max_len", 512)
            set_range(page, ".trn-tuner input.trn-count", 3)
            candidate = controls_spec("step", 32, 512, 3, "")  # what Python builds from these controls
            expect(tuner.locator(".trn-policy")).to_have_text(f"candidate: {candidate}")
            expect(compiles_card).to_have_text("3")  # 3 buckets, every one observed
            tuner.locator("button.trn-apply").click()
            expect(tuner.locator(".trn-applied")).to_have_text(f"in force: {candidate}")
            page.screenshot(path=str(shots / "dashboard.png"))

            run_cell(page, 2)
            after = figures(page)
            assert after["policy"] == candidate
            assert after["candidate"] == candidate
            assert str(after["compiles"]) == compiles_card.inner_text()

            # 100,000 given samples: each control move comes back with new read-outs (round trip printed).
            big = page.locator(".trn-tuner").nth(1)
            expect(big.locator("rect.trn-bin").first).to_be_visible()
            big.locator("select.trn-kind").select_option("step")
            expect(big.locator(".trn-policy")).to_have_text(re.compile("candidate: step:"))
            round_trips = page.evaluate(MOVE_COUNT, 1)
            assert len(round_trips) == 10 and all(t >= 0 for t in round_trips)
            expect(big.locator(".trn-policy")).to_have_text(f"candidate: {controls_spec('step', 16, 4096, 14, '')}")
            print(f"tuner round trips (100,000 samples, ms): {sorted(round(t, 1) for t in round_trips)}")
        finally:
            browser.close()
    assert (shots / "dashboard.png").stat().st_size > 10_000
    print(f"screenshots in {shots}")


EMPTY_VIEWS = [
    "import trn_notebook\n"
    "from trn_notebook.widgets import CacheView, MemoryView, PlacementView, ShapeTuner\n"
    "trn_notebook.reset()",
    "PlacementView()",
    "CacheView()",
    "MemoryView()",
    "ShapeTuner()",
]  # a TimelineWidget cannot be empty: profiling nothing on the device raises and says what to do


def test_views_with_no_data_say_what_will_appear_and_how(lab: tuple[str, Path]) -> None:
    """Issue 13 item 9: an empty view is a sentence naming what will appear and what to run, never a blank box."""
    url, root = lab
    write_notebook(root / "empty.ipynb", EMPTY_VIEWS)
    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            open_notebook(page, url, "empty.ipynb")
            run_all_cells(page, timeout=120_000)
            for cls, how in [
                ("trn-placement", 'device="neuron"'),
                ("trn-cache", 'backend="neuron"'),
                ("trn-memory", "tensors created on neuron"),
                ("trn-tuner", "bucketed"),
            ]:
                view = page.locator(f".{cls}").first
                expect(view).to_contain_text(re.compile("appear"), timeout=30_000)
                text = view.evaluate("(node) => node.textContent")
                assert how in text, f"{cls}: the empty state does not say how to fill it: {text[:300]!r}"
            assert not errors, errors
        finally:
            browser.close()
