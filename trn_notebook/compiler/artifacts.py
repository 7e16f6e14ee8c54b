"""What each compile produced, kept for ``explain()`` and written to the debug directory on request.

Texts are rendered lazily (printing IR after every pass costs time the cold compile should not
pay): a bundle keeps the immutable graphs and renders on :meth:`Bundle.stages`.
``TORCH_NEURONX_DEBUG_DIR`` + ``TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS=1`` write the
same texts as files, one directory per graph.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from .. import locks as _locks
from .. import state as _state
from ..outfiles import write_all
from .config import get_config
from .ir import Graph
from .schedule import Schedule
from .text import print_graph

log = logging.getLogger("trn_notebook.compiler")
CAPACITY = 64


@dataclass
class Bundle:
    """Artifacts of one compiled graph."""

    graph_name: str
    model_name: str
    kind: str
    fx_text: str
    aten_text: str
    lowered: Graph | None
    history: list[tuple[str, Graph]] = field(default_factory=list)
    final: Graph | None = None
    schedule: Schedule | None = None
    note: str = ""

    def ir_text(self) -> str:
        """The lowered IR; on a cache hit (nothing lowered) the cached IR, which is the IR after passes."""
        if self.lowered is None:
            if self.final is not None:
                return f"# {self.note}: the cached IR (after passes); lowering did not run\n{print_graph(self.final)}"
            return f"(lowering skipped: {self.note})\n"
        return print_graph(self.lowered)

    def passes_text(self) -> str:
        if not self.history:
            final = print_graph(self.final) if self.final is not None else ""
            return f"(passes skipped: {self.note})\n{final}"
        parts = [f"# after {name}\n{print_graph(g)}" for name, g in self.history]
        return "\n".join(parts)


class Artifacts:
    """Bounded registry of bundles by graph name (newest last)."""

    def __init__(self) -> None:
        self.lock = _locks.make("leaf", "compiled artifacts")
        self.bundles: OrderedDict[str, Bundle] = OrderedDict()

    def add(self, bundle: Bundle) -> None:
        with self.lock:
            self.bundles.pop(bundle.graph_name, None)
            self.bundles[bundle.graph_name] = bundle
            while len(self.bundles) > CAPACITY:
                self.bundles.popitem(last=False)
        cfg = get_config()
        if cfg.preserve_artifacts and cfg.debug_dir:
            write_bundle(Path(cfg.debug_dir), bundle)

    def for_model(self, model_name: str) -> list[Bundle]:
        """Bundles of ``model_name``, oldest first."""
        with self.lock:
            return [b for b in self.bundles.values() if b.model_name == model_name]

    def snapshot(self) -> list[str]:
        """The graph names with a bundle, oldest first."""
        with self.lock:
            return list(self.bundles)

    def reset(self) -> None:
        """Forget every bundle."""
        with self.lock:
            self.bundles.clear()


artifacts = Artifacts()
_state.register("artifacts", artifacts, reset="compiled")  # bundles of graphs held in memory


def write_bundle(root: Path, b: Bundle) -> Path | None:
    """Write one bundle as text files under ``root/<graph_name>/``; returns the directory."""
    d = root / b.graph_name
    texts = [("fx_graph.py", b.fx_text), (f"aten_{b.kind}.py", b.aten_text), ("ir_lowered.ir", b.ir_text())]
    texts += [(f"ir_{i + 1:02d}_{name}.ir", print_graph(g)) for i, (name, g) in enumerate(b.history)]
    if b.final is not None:
        texts.append(("ir_final.ir", print_graph(b.final)))
    if b.schedule is not None:
        texts.append(("schedule.txt", b.schedule.text() + "\n"))
    try:
        d.mkdir(parents=True, exist_ok=True)
        write_all([(d / name, text.encode("utf-8")) for name, text in texts])  # the whole bundle or none of it
    except OSError as exc:
        log.warning("could not write compilation artifacts to %s: %s", d, exc)
        return None
    return d
