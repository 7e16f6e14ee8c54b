"""The library behind the ``%trn`` magics: every magic is one of these calls, usable without IPython."""

from .cellfunc import CellFunction, CellRewriteError, rewrite_cell
from .compiled import CompileReport, clear_compiled_cells, compile_cell, compiled_cells, parse_options
from .device import device_card, use_device
from .eager import EagerReport, EagerWindow
from .timing import TimeitResult, timeit
from .views import cache, compatibility, dashboard, explain, memory, ops, report, shapes

__all__ = [
    "CellFunction",
    "CellRewriteError",
    "CompileReport",
    "EagerReport",
    "EagerWindow",
    "TimeitResult",
    "cache",
    "clear_compiled_cells",
    "compatibility",
    "compile_cell",
    "compiled_cells",
    "dashboard",
    "device_card",
    "explain",
    "memory",
    "ops",
    "parse_options",
    "report",
    "rewrite_cell",
    "shapes",
    "timeit",
    "use_device",
]
