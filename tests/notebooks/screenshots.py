"""Stored screenshots of the workshop's widgets, and a tolerant comparison against them (issue 30, item 7).

A widget is captured with a margin of :data:`MARGIN` px to its right and below it (so content drawn past
the widget's frame shows up), then reduced to a *thumbnail*: the mean colour of every
:data:`BLOCK` × :data:`BLOCK` block of pixels. Text becomes grey smudges, so a figure that differs from run
to run (a measured time) moves a few blocks a little, while a clipped table, a missing column, a bar
chart drawn past its frame or a theme that no longer applies moves many blocks a lot.

The comparison fails when the captures' sizes differ by more than :data:`SIZE_SLACK_PX`, or when more than
:data:`MAX_FRACTION` of the thumbnail's blocks differ from the stored one by more than :data:`TOLERANCE`
(0..255, in any colour channel). Chromium decodes and reduces both images (the page's canvas), so no
image library is needed.

Measured between runs of the workshop (two whole, one partial; load 5-7 on 2 cores), the fraction of blocks
beyond the tolerance was at most 0.6 % for most widgets, while clipping a widget to 65 % of its width moved
4-17 % of them where the right third holds content (02's and 09's op tables 14-17 %) and drawing it 24 px
past its frame 12-42 %; a widget whose right third is mostly empty moves little when clipped there (04's
tuner 2 %, 14's card 0.8 %: not caught). A few widgets draw measured figures and vary more from run to run;
their goldens carry a larger ``max_fraction`` in ``index.json`` (about twice the variation measured): 05's
cache view (5.4 %), 06's memory timeline (17 %, wall time on its x axis: only a size change or a gross
change is caught there), 06's snapshot (4.2 %), 09's second widget (1.7 %) and 10's first (5.2 %). 06's memory timeline also has a
``size_slack`` of 20 px: a pause of 2 s or more (a busy machine) adds the one-line "axis breaks" note.

The stored thumbnails are ``tests/notebooks/goldens/<notebook>-<n>-<light|dark>.png`` (small PNGs, open
them to see what is expected) and ``index.json`` (each capture's full size). Refresh them after a
deliberate change to a widget's look with ``TRN_UPDATE_GOLDENS=1`` on the browser test (it writes every
capture of the cold pass instead of comparing; review the PNGs' diff before committing them).
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

GOLDENS = Path(__file__).resolve().parent / "goldens"
INDEX = GOLDENS / "index.json"
UPDATE = os.environ.get("TRN_UPDATE_GOLDENS") == "1"
BLOCK = 8
MARGIN = 12
TOLERANCE = 24
MAX_FRACTION = 0.03  # a golden's own ``max_fraction`` in index.json replaces it (a widget that varies)
SIZE_SLACK_PX = 8

# The thumbnail of a PNG (base64): the mean colour of each block, as a PNG data URL, with both sizes.
_THUMB = """async ({b64, block}) => {
    const img = new Image();
    img.src = 'data:image/png;base64,' + b64;
    await img.decode();
    const full = document.createElement('canvas');
    full.width = img.width; full.height = img.height;
    const fctx = full.getContext('2d');
    fctx.drawImage(img, 0, 0);
    const src = fctx.getImageData(0, 0, img.width, img.height).data;
    const tw = Math.ceil(img.width / block), th = Math.ceil(img.height / block);
    const sums = new Float64Array(tw * th * 4);
    for (let y = 0; y < img.height; y++) {
        for (let x = 0; x < img.width; x++) {
            const s = (y * img.width + x) * 4, t = (Math.floor(y / block) * tw + Math.floor(x / block)) * 4;
            sums[t] += src[s]; sums[t + 1] += src[s + 1]; sums[t + 2] += src[s + 2]; sums[t + 3] += 1;
        }
    }
    const thumb = document.createElement('canvas');
    thumb.width = tw; thumb.height = th;
    const tctx = thumb.getContext('2d');
    const out = tctx.createImageData(tw, th);
    for (let t = 0; t < tw * th; t++) {
        const n = sums[t * 4 + 3];
        out.data[t * 4] = Math.round(sums[t * 4] / n);
        out.data[t * 4 + 1] = Math.round(sums[t * 4 + 1] / n);
        out.data[t * 4 + 2] = Math.round(sums[t * 4 + 2] / n);
        out.data[t * 4 + 3] = 255;
    }
    tctx.putImageData(out, 0, 0);
    return {width: img.width, height: img.height, png: thumb.toDataURL('image/png')};
}"""

# Compare two thumbnails (data URLs) over their common area: the fraction of blocks beyond the tolerance.
_COMPARE = """async ({a, b, tolerance}) => {
    const pixels = async (url) => {
        const img = new Image();
        img.src = url;
        await img.decode();
        const c = document.createElement('canvas');
        c.width = img.width; c.height = img.height;
        const ctx = c.getContext('2d');
        ctx.drawImage(img, 0, 0);
        return {w: img.width, h: img.height, d: ctx.getImageData(0, 0, img.width, img.height).data};
    };
    const [p, q] = [await pixels(a), await pixels(b)];
    const w = Math.min(p.w, q.w), h = Math.min(p.h, q.h);
    let differ = 0, worst = 0;
    for (let y = 0; y < h; y++) {
        for (let x = 0; x < w; x++) {
            const i = (y * p.w + x) * 4, j = (y * q.w + x) * 4;
            const d = Math.max(Math.abs(p.d[i] - q.d[j]), Math.abs(p.d[i + 1] - q.d[j + 1]),
                               Math.abs(p.d[i + 2] - q.d[j + 2]));
            worst = Math.max(worst, d);
            if (d > tolerance) differ += 1;
        }
    }
    return {fraction: differ / Math.max(w * h, 1), worst, blocks: w * h};
}"""


def capture(page: Page, widget: Locator) -> bytes:
    """A PNG of ``widget`` with :data:`MARGIN` px of the page to its right and below (content past its frame)."""
    widget.scroll_into_view_if_needed()
    page.wait_for_timeout(100)
    box = widget.bounding_box()
    assert box is not None, "the widget is not rendered"
    view = page.viewport_size or {"width": 1500, "height": 1000}
    width = min(box["width"] + MARGIN, view["width"] - box["x"])
    height = min(box["height"] + MARGIN, view["height"] - box["y"])
    clip = {"x": box["x"], "y": box["y"], "width": width, "height": height}
    return page.screenshot(clip=clip, animations="disabled")


def thumbnail(page: Page, png: bytes) -> dict[str, Any]:
    """``{"width", "height", "png"}``: the capture's size and its thumbnail as a PNG data URL."""
    return dict(page.evaluate(_THUMB, {"b64": base64.b64encode(png).decode(), "block": BLOCK}))


def _index() -> dict[str, dict[str, int]]:
    return json.loads(INDEX.read_text()) if INDEX.exists() else {}


def store(page: Page, key: str, png: bytes) -> None:
    """Write ``png``'s thumbnail as the golden of ``key`` (``TRN_UPDATE_GOLDENS=1``)."""
    thumb = thumbnail(page, png)
    GOLDENS.mkdir(parents=True, exist_ok=True)
    (GOLDENS / f"{key}.png").write_bytes(base64.b64decode(thumb["png"].split(",", 1)[1]))
    index = _index()
    index[key] = {**index.get(key, {}), "width": int(thumb["width"]), "height": int(thumb["height"])}
    INDEX.write_text(json.dumps(dict(sorted(index.items())), indent=1) + "\n")


def difference(page: Page, key: str, png: bytes) -> dict[str, Any]:
    """How ``png`` differs from the golden of ``key``: sizes, fraction of blocks beyond the tolerance, worst."""
    path = GOLDENS / f"{key}.png"
    stored = _index().get(key)
    if stored is None or not path.exists():
        return {"missing": True}
    thumb = thumbnail(page, png)
    golden = "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()
    result = dict(page.evaluate(_COMPARE, {"a": thumb["png"], "b": golden, "tolerance": TOLERANCE}))
    result["size"] = (int(thumb["width"]), int(thumb["height"]))
    result["golden_size"] = (stored["width"], stored["height"])
    result["max_fraction"] = float(stored.get("max_fraction", MAX_FRACTION))
    result["size_slack"] = int(stored.get("size_slack", SIZE_SLACK_PX))
    return result


def mismatch(page: Page, key: str, png: bytes) -> str | None:
    """Why ``png`` does not look like its golden, or None when it does (within the tolerances above)."""
    return judge(key, difference(page, key, png))


def judge(key: str, d: dict[str, Any]) -> str | None:
    """Why a :func:`difference` fails the tolerances above, or None when it does not."""
    if d.get("missing"):
        return f"{key}: no stored golden (run the browser test with TRN_UPDATE_GOLDENS=1 and review it)"
    (w, h), (gw, gh) = d["size"], d["golden_size"]
    if abs(w - gw) > d["size_slack"] or abs(h - gh) > d["size_slack"]:
        return f"{key}: {w}×{h} px, the golden is {gw}×{gh} px (allowed ±{d['size_slack']} px)"
    if d["fraction"] > d["max_fraction"]:
        return (
            f"{key}: {d['fraction']:.1%} of {d['blocks']} blocks differ by more than {TOLERANCE} "
            f"(allowed {d['max_fraction']:.0%}; worst {d['worst']})"
        )
    return None
