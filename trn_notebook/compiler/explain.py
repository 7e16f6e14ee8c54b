"""``explain()``: every stage of what the neuron compiler did to a callable, as readable text.

Stages: ``fx`` (dynamo's graph), ``aten_forward`` / ``aten_backward`` (AOT Autograd), ``ir``
(lowered IR, shape-typed, user source lines as comments), ``passes`` (IR after each pass) and
``schedule`` (fused kernels, engines, modeled times).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

from ..display.format import fmt_compile
from .artifacts import Bundle, artifacts

STAGE_KEYS = ("fx", "aten_forward", "aten_backward", "ir", "passes", "schedule")


@dataclass
class Explanation:
    """Text of every compile stage of one callable (``stages[key]``), printable and HTML-renderable."""

    name: str
    stages: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        parts = [f"neuron compilation of {self.name}"]
        for key in STAGE_KEYS:
            parts.append(f"\n==== {key} ====\n{self.stages.get(key, '').rstrip()}")
        return "\n".join(parts) + "\n"

    def _repr_html_(self) -> str:
        blocks = [f"<h4>neuron compilation of {html.escape(self.name)}</h4>"]
        for key in STAGE_KEYS:
            text = html.escape(self.stages.get(key, ""))
            blocks.append(f"<details><summary><b>{key}</b></summary><pre>{text}</pre></details>")
        return "\n".join(blocks)


def _name_of(fn_or_compiled: Any) -> str:
    from .api import CompiledCallable, callable_name

    if isinstance(fn_or_compiled, CompiledCallable):
        return fn_or_compiled.name
    if isinstance(fn_or_compiled, str):
        return fn_or_compiled
    orig = getattr(fn_or_compiled, "_orig_mod", None) or getattr(fn_or_compiled, "_torchdynamo_orig_callable", None)
    return callable_name(orig if orig is not None else fn_or_compiled)


def explain(fn_or_compiled: Any, *example_args: Any, **example_kwargs: Any) -> Explanation:
    """Explain the latest neuron compilation of ``fn_or_compiled`` (a compiled callable, function or name).

    With example arguments, compiles and runs it once first. Raises ``ValueError`` if nothing
    was compiled for it yet.
    """
    if example_args or example_kwargs:
        from .api import CompiledCallable, compile

        target = fn_or_compiled if isinstance(fn_or_compiled, CompiledCallable) else compile(fn_or_compiled)
        target(*example_args, **example_kwargs)
        fn_or_compiled = target
    name = _name_of(fn_or_compiled)
    bundles = artifacts.for_model(name)
    if not bundles:
        raise ValueError(
            f"no neuron compilation recorded for {name!r}: call the compiled function once first, "
            "or pass example arguments: trn_notebook.explain(fn, *args)"
        )
    latest: dict[str, Bundle] = {}
    for b in bundles:
        latest[b.kind] = b
    fw = latest.get("forward") or latest.get("inference")
    bw = latest.get("backward")
    main = fw or bw
    assert main is not None
    order = [b for b in (fw, bw) if b is not None]
    stages = {
        "fx": main.fx_text,
        "aten_forward": fw.aten_text if fw else "(no forward graph)",
        "aten_backward": bw.aten_text if bw else "(no backward graph yet: call .backward() once)",
        "ir": "\n".join(b.ir_text() for b in order),
        "passes": "\n".join(b.passes_text() for b in order),
        "schedule": "\n\n".join(
            f"{b.graph_name}\n{b.schedule.text()}\n{_compile_line(b.graph_name)}"
            for b in order
            if b.schedule is not None
        ),
    }
    return Explanation(name, stages)


def _compile_line(graph_name: str) -> str:
    """The graph's compile time, measured (our compiler) beside modeled (the Neuron compiler, from cold)."""
    from .compile_log import snapshot
    from .compile_time import record_compile_s

    record = next((r for r in reversed(snapshot()) if r.graph_name == graph_name), None)
    if record is None:
        return "compile: not in the compile log (reset since)"
    return f"compile ({record.cache_result}): {fmt_compile(record.compile_s, record_compile_s(record))} (from cold)"
