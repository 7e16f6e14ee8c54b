"""Walking a chunked linear-attention scan once per call instead of once per chunk (identical ops).

``transformers``' torch path of Qwen3.5's gated DeltaNet (``torch_chunk_gated_delta_rule``) ends with a
sequential scan ``for i in range(num_chunks)`` over 64-token chunks whose every iteration runs the same
ops on the same shapes; on fake tensors only the shapes exist, so the walk records the same ``OpCount``
list ``num_chunks`` times, and at a bucket of 8192 that loop is nearly all of the walk's time.
:func:`scan_once` rebuilds the function from its own source with the scan run once and the ops the
recorder saw in it repeated ``num_chunks - 1`` times, and :func:`patched` swaps it into the model's
module for the duration of a walk. When the source does not have that shape (another ``transformers``
version), nothing is swapped and the walk runs every chunk. ``tests/fidelity/test_walk_cache.py``
checks that the ops recorded are identical either way.
"""

from __future__ import annotations

import ast
import inspect
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from torch.utils._python_dispatch import _get_current_dispatch_mode

FUNCTION = "torch_chunk_gated_delta_rule"
LOOP_VARIABLE = "num_chunks"


def _mark() -> int:
    """Ops recorded so far by the innermost recording mode (0 when none records)."""
    ops = getattr(_get_current_dispatch_mode(), "ops", None)
    return len(ops) if isinstance(ops, list) else 0


def _repeat(mark: int, times: int) -> None:
    """Append the ops recorded since ``mark`` ``times`` more times (nothing when none records)."""
    ops = getattr(_get_current_dispatch_mode(), "ops", None)
    if isinstance(ops, list) and times > 0:
        ops.extend(ops[mark:] * times)


def _is_scan(node: ast.stmt) -> bool:
    """``for ... in range(num_chunks):``"""
    it = node.iter if isinstance(node, ast.For) else None
    return (
        isinstance(it, ast.Call)
        and isinstance(it.func, ast.Name)
        and it.func.id == "range"
        and len(it.args) == 1
        and isinstance(it.args[0], ast.Name)
        and it.args[0].id == LOOP_VARIABLE
    )


def scan_once(module: Any) -> Callable[..., Any] | None:
    """``module``'s :data:`FUNCTION` rebuilt with its chunk scan walked once and repeated, or None when
    the module has no such function or its scan is not a top-level ``for ... in range(num_chunks)``."""
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError, SyntaxError):
        return None
    fdef = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == FUNCTION), None)
    if fdef is None:
        return None
    scans = [i for i, n in enumerate(fdef.body) if _is_scan(n)]
    if len(scans) != 1:
        return None
    i = scans[0]
    loop = fdef.body[i]
    assert isinstance(loop, ast.For)
    loop.iter = ast.parse(f"range(min({LOOP_VARIABLE}, 1))", mode="eval").body
    mark = ast.parse("__walk_mark__ = __walk_mark_fn__()").body[0]
    repeat = ast.parse(f"__walk_repeat_fn__(__walk_mark__, {LOOP_VARIABLE} - 1)").body[0]
    fdef.body[i : i + 1] = [mark, loop, repeat]
    fdef.decorator_list = []
    ast.fix_missing_locations(tree)
    namespace = dict(vars(module), __walk_mark_fn__=_mark, __walk_repeat_fn__=_repeat)
    exec(compile(ast.Module(body=[fdef], type_ignores=[]), f"<walk {module.__name__}>", "exec"), namespace)
    fn = namespace[FUNCTION]
    return fn if callable(fn) else None


@contextmanager
def patched(model: Any) -> Iterator[bool]:
    """While inside, the module that defines ``model``'s class uses :func:`scan_once`'s function (yields
    whether it was swapped in)."""
    module = sys.modules.get(type(model).__module__)
    fn = scan_once(module) if module is not None and hasattr(module, FUNCTION) else None
    if fn is None:
        yield False
        return
    original = getattr(module, FUNCTION)
    setattr(module, FUNCTION, fn)
    try:
        yield True
    finally:
        setattr(module, FUNCTION, original)
