"""``trn_notebook.compile``: ``torch.compile(backend="neuron")`` with the contracts checked up front.

The result is a :class:`CompiledCallable`: it calls the dynamo-compiled object, counts each call's
input signature in the shape log, and turns a ``fullgraph=True`` graph break into a
:class:`GraphBreakError` naming the break and the user's source line.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import torch

from .. import state as _state
from . import contracts
from .backend import ensure_capture_callback, neuron_backend, register
from .shape_log import shape_log

_names: dict[str, int] = {}
# names given to compiled callables: restart when compiled graphs are dropped
_state.register("callable_names", _state.Globals(__name__, "_names"), reset="compiled")


class GraphBreakError(RuntimeError):
    """``fullgraph=True`` and the function has a graph break."""


def callable_name(obj: Any) -> str:
    """A readable name for a module or function (class name for modules)."""
    if isinstance(obj, torch.nn.Module):
        return type(obj).__name__
    return getattr(obj, "__name__", type(obj).__name__)


def _unique(name: str) -> str:
    n = _names.get(name, 0)
    _names[name] = n + 1
    return name if n == 0 else f"{name}_{n + 1}"


def _param_names(obj: Any) -> list[str]:
    fn = obj.forward if isinstance(obj, torch.nn.Module) else obj
    try:
        return [
            p.name
            for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        return []


class CompiledCallable:
    """A neuron-compiled module or function; attribute access falls through to the original."""

    def __init__(self, original: Any, compiled: Any, name: str, fullgraph: bool) -> None:
        self._original = original
        self._compiled = compiled
        self.name = name
        self.fullgraph = fullgraph
        self._params = _param_names(original)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        named = [
            (self._params[i] if i < len(self._params) else f"arg{i}", a)
            for i, a in enumerate(args)
            if isinstance(a, torch.Tensor)
        ]
        named += [(k, v) for k, v in kwargs.items() if isinstance(v, torch.Tensor)]
        shape_log.observe(self.name, named)
        ensure_capture_callback()
        try:
            return self._compiled(*args, **kwargs)
        except torch._dynamo.exc.Unsupported as exc:
            if not self.fullgraph:
                raise
            raise graph_break_error(self.name, exc) from exc

    def __getattr__(self, item: str) -> Any:
        if item.startswith("_"):
            raise AttributeError(item)
        return getattr(self._original, item)

    def __repr__(self) -> str:
        return f"<neuron-compiled {self.name}>"


def graph_break_error(name: str, exc: BaseException) -> GraphBreakError:
    """A readable error for a graph break under ``fullgraph=True``, naming the user's source line."""
    stack = getattr(exc, "real_stack", None) or []
    where = ""
    if stack:
        frame = stack[-1]
        from ..device.source_lines import format_source  # names notebook cells "cell [N] line L"

        at = format_source(frame.filename, frame.lineno or 0)
        where = f" at {at}" + (f" ({frame.line.strip()})" if frame.line else "")
    reason = str(exc).strip().split("\n")[0]
    return GraphBreakError(
        f"fullgraph=True, but {name} has a graph break{where}: {reason}. Remove that statement from the compiled "
        "code (move prints, .item() and data-dependent Python branches outside), or compile with fullgraph=False "
        "to let each piece compile separately."
    )


def compile(
    model_or_fn: Any,
    *,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    mode: str | None = None,
    options: dict[str, Any] | None = None,
) -> CompiledCallable:
    """Compile ``model_or_fn`` for neuron; same signature as ``torch.compile(backend="neuron")``.

    Raises ``DynamicShapesError`` for ``dynamic=True`` and ``TypeError`` for malformed options.
    Unsupported modes warn once and compile as default.
    """
    register()
    if dynamic:
        raise contracts.dynamic_error()
    contracts.check_mode(mode)
    contracts.resolve_options(options)
    name = _unique(str((options or {}).get("model_name") or callable_name(model_or_fn)))
    backend = functools.partial(neuron_backend, options=options, callable_name=name)
    compiled = torch.compile(model_or_fn, backend=backend, fullgraph=fullgraph, dynamic=False)
    return CompiledCallable(model_or_fn, compiled, name, fullgraph)
