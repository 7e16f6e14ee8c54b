"""``trn_notebook.port_check``: which lines of a notebook or script only make sense on the simulator.

Every call, attribute, magic option or environment variable that exists only in the simulator is listed
with its cell, line and what to write on a real Trn2 instead. A notebook cell tagged ``simulator-only``
(cell metadata ``tags``) is expected to hold such lines: its findings are reported as *marked* and do not
fail the check. Python is read with :mod:`ast` (never executed); IPython magics are read line by line.
"""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..limits import LimitError, check_json_shape, read_limited

MARK_TAG = "simulator-only"

_TRACE = "torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1])"
_COMPILE = "torch.compile(model, backend='neuron', fullgraph=True)"
_PLACEMENT = (
    "none: TorchNeuron decides placement (TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1 narrows fallback)"
)
_CLOCKS = "torch.neuron.synchronize() then time.perf_counter(), or " + _TRACE
_MEMORY = "torch.neuron.memory_stats() / memory_allocated() / max_memory_allocated()"

# Qualified name (after import resolution) → what to use on hardware. A prefix ending in "." covers a module.
RULES: dict[str, str] = {
    "trn_notebook.set_chip": "none: the instance decides the chip (torch.neuron.get_device_properties(0))",
    "trn_notebook.device.set_chip": "none: the instance decides the chip (torch.neuron.get_device_properties(0))",
    "trn_notebook.set_memory_capacity": "none: the real HBM capacity applies (" + _MEMORY + ")",
    "trn_notebook.device.set_memory_capacity": "none: the real HBM capacity applies (" + _MEMORY + ")",
    "trn_notebook.set_op_category": _PLACEMENT,
    "trn_notebook.device.set_op_category": _PLACEMENT,
    "trn_notebook.device.policy": _PLACEMENT,
    "trn_notebook.device.policy_table": _PLACEMENT,
    "trn_notebook.device.policy.": _PLACEMENT,
    "trn_notebook.device.clocks": _CLOCKS,
    "trn_notebook.device.clocks.": _CLOCKS,
    "trn_notebook.device.memory.runtime.": _MEMORY,
    "trn_notebook.device.allocator": _MEMORY,
    "trn_notebook.device.override": "none: the cost model and device configuration are the simulator's",
    "trn_notebook.device.set_config": "none: the cost model and device configuration are the simulator's",
    "trn_notebook.device.costmodel.": "none: the cost model is the simulator's; measure with " + _TRACE,
    "trn_notebook.save_trace": _TRACE + " then prof.export_chrome_trace(path)",
    "trn_notebook.memory_timeline": _MEMORY + " sampled, or the memory snapshot",
    "trn_notebook.phase": "torch.neuron.reset_peak_memory_stats() before the phase, max_memory_allocated() after",
    "trn_notebook.compile": _COMPILE,
    "trn_notebook.explain": "TORCH_NEURONX_DEBUG_DIR=DIR + TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS=1 (fx_graphs/, stablehlo/)",
    "trn_notebook.bucketed": "pad inputs to fixed bucket lengths, then " + _COMPILE,
    "trn_notebook.BucketPolicy": "pad inputs to fixed bucket lengths, then " + _COMPILE,
    "trn_notebook.tune": "pad inputs to fixed bucket lengths, then " + _COMPILE,
    "trn_notebook.suggest_policy": "pad inputs to fixed bucket lengths, then " + _COMPILE,
    "trn_notebook.widgets.ShapeTuner": "pad inputs to fixed bucket lengths, then " + _COMPILE,
    "trn_notebook.compiler.": _COMPILE + "; cache: TORCH_NEURONX_NEFF_CACHE_DIR",
    "trn_notebook.cache.export": "copy the NEFF cache directory (TORCH_NEURONX_NEFF_CACHE_DIR) between machines",
    "trn_notebook.cache.import_": "point TORCH_NEURONX_NEFF_CACHE_DIR at a copied NEFF cache directory",
    "trn_notebook.profile": _TRACE + " with TorchNeuron's profiler plugin (NeuronConfig)",
    "trn_notebook.why_slow": "read a torch.profiler trace of the device in Neuron Explorer (its modeled lanes are ours)",
    "trn_notebook.compare_ranks": "torchrun --nproc-per-node=N script.py, one layout per run",
    # The NKI simulator's cost model (kernels themselves run on hardware through the real nki / nki_op).
    "trn_notebook.nki.estimate": "profile the kernel on the device (torch.profiler, or the Neuron profiler)",
    "trn_notebook.nki.set_kernel_cost_constants": "none: real engines have no cost constants to set",
    "trn_notebook.nki.get_kernel_cost_constants": "none: real engines have no cost constants to read",
    "trn_notebook.nki.reset_kernel_cost_constants": "none: real engines have no cost constants to reset",
    # Additions of the simulator's torch.neuron module that TorchNeuron does not have.
    "torch.neuron.phase": "torch.neuron.reset_peak_memory_stats() before the phase, max_memory_allocated() after",
    "torch.neuron.elapsed_modeled_device_time": _CLOCKS,
}
_ROOTS = ("trn_notebook", "torch")  # packages whose imports the scanner follows
ENV_RULES: dict[str, str] = {
    "TRN_NOTEBOOK_CHIP": "none: the instance decides the chip",
    "TRN_NOTEBOOK_HBM_BYTES": "none: the real HBM capacity applies",
    "TRN_NOTEBOOK_STRICT": "TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1",
}
# `%trn` / `%%trn` words and options that drive the simulator's models or compiler. A plain `%%trn compile`
# is portable: on hardware it runs TorchNeuron's compiler (only `--buckets` is the simulator's).
MAGIC_RULES: dict[str, str] = {
    "--chip": "none: the instance decides the chip",
    "--cores": "none: the instance (and NEURON_LOGICAL_NC_CONFIG) decides the cores",
    "--blocking": "NEURON_LAUNCH_BLOCKING=1 in the environment before the kernel starts",
    "--fusion": "TORCH_NEURONX_ENABLE_CONCATENATION=1 in the environment before the kernel starts",
    "--buckets": "pad inputs to your own fixed sizes before a plain %%trn compile or torch.compile(backend='neuron')",
    "--snapshot": "torch.neuron.memory_stats() (TorchNeuron's memory-profiling guide for snapshots)",
    "--export": "copy the NEFF cache directory (TORCH_NEURONX_NEFF_CACHE_DIR) between machines",
    "--import": "point TORCH_NEURONX_NEFF_CACHE_DIR at a copied NEFF cache directory",
    "explain": "TORCH_NEURONX_DEBUG_DIR=DIR + TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS=1",
    "shapes": "torch.neuron.get_dynamo_metrics() (one record per compiled graph)",
    "profile": "torch.profiler with TorchNeuron's profiler plugin (NeuronConfig)",
    "ranks": "torchrun --nproc-per-node=N script.py",
}


@dataclass(frozen=True)
class Finding:
    """One simulator-only use: where it is, what it is and what to write on hardware instead."""

    cell: int | None  # notebook cell index (0-based), None for a script
    line: int  # 1-based line in the cell (or script)
    name: str  # e.g. "trn_notebook.set_chip", "%trn device --chip", "$TRN_NOTEBOOK_CHIP"
    code: str  # the source line
    hardware: str  # what to use on a Trn2 instead
    marked: bool  # the cell is tagged simulator-only


@dataclass
class PortReport:
    """The findings of :func:`port_check`; ``ok`` when every finding sits in a cell marked simulator-only."""

    source: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing unmarked would behave differently (or fail) on real hardware."""
        return not self.unmarked

    @property
    def unmarked(self) -> list[Finding]:
        """The findings outside cells tagged simulator-only."""
        return [f for f in self.findings if not f.marked]

    def rows(self) -> list[dict[str, Any]]:
        """One dict per finding (cell, line, name, code, hardware, marked)."""
        return [f.__dict__.copy() for f in self.findings]

    def __str__(self) -> str:
        if not self.findings:
            verdict = "ready for a Trn2 (no simulator-only uses)"
        elif self.ok:
            verdict = (
                f"passes: {len(self.findings)} simulator-only uses, all in cells tagged {MARK_TAG!r} "
                "(on a Trn2 skip those cells or use the equivalents below)"
            )
        else:
            verdict = f"{len(self.unmarked)} simulator-only uses outside cells tagged {MARK_TAG!r}"
        head = f"port-check {self.source}: {verdict}"
        lines = [head]
        for f in self.findings:
            where = f"cell {f.cell} line {f.line}" if f.cell is not None else f"line {f.line}"
            mark = " (marked)" if f.marked else ""
            lines.append(f"  {where}{mark}: {f.code.strip()}\n      {f.name} → on hardware: {f.hardware}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        import html

        body = "".join(
            "<tr>"
            + "".join(
                f"<td>{html.escape(str(v))}</td>"
                for v in ("" if f.cell is None else f.cell, f.line, f.name, f.code.strip(), f.hardware)
            )
            + f"<td>{'marked' if f.marked else ''}</td></tr>"
            for f in self.findings
        )
        head = html.escape(str(self).splitlines()[0])
        return (
            f"<div><b>{head}</b><table><tr><th>cell</th><th>line</th><th>simulator-only</th><th>code</th>"
            f"<th>on hardware</th><th></th></tr>{body}</table></div>"
        )


class PortCheckError(ValueError):
    """The input is not a notebook, a script, or a path to one."""


def _rule(qualified: str) -> str | None:
    if qualified in RULES:
        return RULES[qualified]
    for key, value in RULES.items():
        if key.endswith(".") and qualified.startswith(key):
            return value
    return None


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


class _Scanner(ast.NodeVisitor):
    """Resolves ``import trn_notebook as tn`` / ``from trn_notebook.device import clocks`` and flags uses."""

    def __init__(self, aliases: dict[str, str]) -> None:
        self.aliases = aliases  # local name → qualified name; shared across a notebook's cells
        self.hits: list[tuple[int, str, str]] = []

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            if a.name.split(".")[0] in _ROOTS:
                self.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module and node.module.split(".")[0] in _ROOTS and not node.level:
            for a in node.names:
                qualified = f"{node.module}.{a.name}"
                self.aliases[a.asname or a.name] = qualified
                hardware = _rule(qualified)
                if hardware is not None:
                    self.hits.append((node.lineno, qualified, hardware))

    def _check(self, node: ast.Attribute | ast.Name) -> bool:
        dotted = _dotted(node)
        if dotted is None:
            return False
        head, _, rest = dotted.partition(".")
        if head not in self.aliases:
            return False
        qualified = self.aliases[head] + ("." + rest if rest else "")
        # The longest flagged prefix of the chain: `clocks.snapshot()` reports `...clocks`, once.
        parts = qualified.split(".")
        for n in range(2, len(parts) + 1):
            hardware = _rule(".".join(parts[:n]))
            if hardware is not None:
                self.hits.append((node.lineno, ".".join(parts[:n]), hardware))
                return True
        return False

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if not self._check(node):
            self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load) and self.aliases.get(node.id, "") not in _ROOTS:
            self._check(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and node.value in ENV_RULES:
            self.hits.append((node.lineno, f"${node.value}", ENV_RULES[node.value]))


_MAGIC = re.compile(r"^\s*(%%?)trn\b(.*)$")
_SHELL_ENV = re.compile(r"\b(TRN_NOTEBOOK_[A-Z_]+)\b")


def _magic_findings(line: str) -> list[tuple[str, str]]:
    m = _MAGIC.match(line)
    if not m:
        return []
    words = m.group(2).split()
    prefix = f"{m.group(1)}trn"
    out = []
    if words and words[0] in MAGIC_RULES and not words[0].startswith("--"):
        out.append((f"{prefix} {words[0]}", MAGIC_RULES[words[0]]))
    for word in words[1:]:
        option = word.split("=", 1)[0]
        if option in MAGIC_RULES and option.startswith("--"):
            out.append((f"{prefix} {words[0]} {option}", MAGIC_RULES[option]))
    return out


def _as_python(source: str) -> str:
    """The cell as the kernel runs it: IPython's own ``TransformerManager`` turns magics, shell escapes and
    help syntax into calls of ``get_ipython()``, exactly as IPython does (a ``?`` in a comment stays a
    comment; a continuation line starting with ``% n`` stays an operator). Line numbers are kept."""
    from IPython.core.inputtransformer2 import TransformerManager

    return str(TransformerManager().transform_cell(source))


class _IPythonCalls(ast.NodeVisitor):
    """Findings in ``get_ipython().run_line_magic('trn', ...)``, ``run_cell_magic('trn', ...)`` (its body is
    Python and is scanned in turn) and ``system('...')`` (variables the shell command names)."""

    def __init__(self, aliases: dict[str, str], offset: int) -> None:
        self.aliases, self.offset = aliases, offset
        self.hits: list[tuple[int, str, str]] = []

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        args = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if not (isinstance(func, ast.Attribute) and ast.unparse(func.value) == "get_ipython()") or len(args) != len(
            node.args
        ):
            self.generic_visit(node)
            return
        line = node.lineno + self.offset
        method = func.attr
        if method == "run_line_magic" and len(args) == 2 and args[0] == "trn":
            self.hits.extend((line, name, hw) for name, hw in _magic_findings(f"%trn {args[1]}"))
        elif method == "run_cell_magic" and len(args) == 3 and args[0] == "trn":
            self.hits.extend((line, name, hw) for name, hw in _magic_findings(f"%%trn {args[1]}"))
            self.hits.extend(_scan(args[2], self.aliases, offset=line))  # the body is Python, from the next line
        elif method in ("system", "getoutput") and args:
            self.hits.extend((line, f"${v}", ENV_RULES[v]) for v in _SHELL_ENV.findall(args[0]) if v in ENV_RULES)


def _scan(source: str, aliases: dict[str, str], offset: int = 0) -> list[tuple[int, str, str]]:
    python = _as_python(source)
    try:
        tree = ast.parse(python)
    except SyntaxError:
        # Not Python we can parse: still catch the obvious names token by token, and the magics line by line.
        hits = [(n + offset, name, hw) for n, name, hw in _scan_tokens(python)]
        for i, text in enumerate(python.splitlines()):
            if "get_ipython()" in text:
                try:
                    line_tree = ast.parse(text.strip())
                except SyntaxError:
                    continue
                calls = _IPythonCalls(aliases, offset + i)
                calls.visit(line_tree)
                hits += calls.hits
        return sorted(set(hits))
    scanner = _Scanner(aliases)
    scanner.visit(tree)
    calls = _IPythonCalls(aliases, offset)
    calls.visit(tree)
    return sorted(set([(n + offset, name, hw) for n, name, hw in scanner.hits] + calls.hits))


def _scan_tokens(source: str) -> list[tuple[int, str, str]]:
    hits = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, IndentationError):
        tokens = []
    for tok in tokens:
        if tok.type == tokenize.NAME and f"trn_notebook.{tok.string}" in RULES:
            hits.append((tok.start[0], f"trn_notebook.{tok.string}", RULES[f"trn_notebook.{tok.string}"]))
    return hits


def _cells(obj: Any) -> tuple[str, list[tuple[int | None, str, bool]]]:
    """(label, [(cell index or None, source, marked)]) for a path, a notebook object or a source string."""
    if isinstance(obj, (str, Path)) and (isinstance(obj, Path) or "\n" not in obj):
        path = Path(obj)
        if not path.is_file():
            raise PortCheckError(f"port-check: no such file {str(path)!r} (give a .ipynb or .py path)")
        try:
            raw = read_limited(path, MAX_FILE_BYTES, "notebook or script", _RAISE_HINT)
            if path.suffix == ".ipynb":
                check_json_shape(raw, f"port-check: {path}", MAX_NOTEBOOK_VALUES, 64, _RAISE_HINT)
            text = raw.decode("utf-8")
        except LimitError as exc:
            raise PortCheckError(f"port-check: {exc}") from None
        except UnicodeDecodeError as exc:
            raise PortCheckError(f"port-check: {path} is not UTF-8 text ({exc}); save it as UTF-8") from None
        except (OSError, ValueError) as exc:
            raise PortCheckError(f"port-check: cannot read {path}: {exc}") from None
        if path.suffix == ".ipynb":
            try:
                nb = json.loads(text)
            except (json.JSONDecodeError, RecursionError) as exc:
                raise PortCheckError(f"port-check: {path} is not a notebook (invalid JSON: {exc})") from None
            if not (isinstance(nb, dict) and isinstance(nb.get("cells"), list)):
                raise PortCheckError(f"port-check: {path} is not a notebook (no 'cells' list at the top level)")
            return str(path), _cells(nb)[1]
        return str(path), [(None, text, False)]
    if isinstance(obj, str):
        return "<source>", [(None, obj, False)]
    if isinstance(obj, dict) and isinstance(obj.get("cells"), list):
        cells: list[tuple[int | None, str, bool]] = []
        for i, cell in enumerate(obj["cells"]):
            if not isinstance(cell, dict):
                raise PortCheckError(f"port-check: cell {i} of the notebook is not an object; is the file a notebook?")
            if cell.get("cell_type") != "code":
                continue
            src = cell.get("source", "")
            src = "".join(str(x) for x in src) if isinstance(src, list) else str(src)
            metadata = cell.get("metadata")
            tags = (metadata.get("tags") if isinstance(metadata, dict) else None) or []
            cells.append((i, src, isinstance(tags, list) and MARK_TAG in tags))
        return "<notebook>", cells
    raise PortCheckError(
        f"port-check: expected a notebook or script path, a notebook (nbformat or dict) or source text, "
        f"got {type(obj).__name__}"
    )


MAX_FILE_BYTES = 256 << 20
"""The largest notebook or script read (outputs count: a notebook holds its images)."""
MAX_NOTEBOOK_VALUES = 16_000_000
MAX_CELL_CHARS = 4 << 20
"""The longest code cell (or script) parsed; ``ast.parse`` needs many times its size in memory."""
_RAISE_HINT = "raise trn_notebook.migration.portcheck.MAX_FILE_BYTES / MAX_CELL_CHARS if you need to check it"


def port_check(path_or_notebook: str | Path | dict[str, Any]) -> PortReport:
    """List every simulator-only use in a notebook (path, nbformat node, dict), a ``.py`` file or source text.

    Raises :class:`PortCheckError` for a missing, non-UTF-8 or oversized file (:data:`MAX_FILE_BYTES`),
    invalid notebook JSON, a cell over :data:`MAX_CELL_CHARS` or an unsupported object.
    """
    label, cells = _cells(path_or_notebook)
    report = PortReport(label)
    aliases: dict[str, str] = {}
    for index, source, marked in cells:
        if len(source) > MAX_CELL_CHARS:
            where = "the source" if index is None else f"cell {index}"
            raise PortCheckError(
                f"port-check: {where} has {len(source):,} characters, over the {MAX_CELL_CHARS:,}-character limit "
                f"(parsing it could exhaust the kernel's memory); {_RAISE_HINT}"
            )
        lines = source.splitlines()
        for lineno, name, hardware in _scan(source, aliases):
            code = lines[lineno - 1] if 0 < lineno <= len(lines) else ""
            report.findings.append(Finding(index, lineno, name, code, hardware, marked))
    return report


def port_check_magic(line: str, history: list[str] | None = None) -> PortReport:
    """What ``%trn port-check [PATH]`` shows: the file at PATH, or this session's executed cells (``In``).

    Raises :class:`PortCheckError` as :func:`port_check` does, or when neither a path nor history is given.
    """
    target = line.strip()
    if target:
        return port_check(target)
    if history is None:
        raise PortCheckError(
            "%trn port-check: give a notebook or script path, e.g. %trn port-check 01_quickstart.ipynb"
        )
    cells = [{"cell_type": "code", "source": src, "metadata": {}} for src in history if src.strip()]
    report = port_check({"cells": cells})
    report.source = "this session's cells"
    return report


__all__ = ["MARK_TAG", "Finding", "PortCheckError", "PortReport", "port_check", "port_check_magic"]
