"""Rewrite the source of a notebook cell into a function, so it can be compiled (``%%trn compile``).

Parameters are the names the cell reads before it writes them and that the namespace holds as
data (modules, classes and functions stay global lookups); results are the names the cell assigns
at its top level. The function's line numbers are the cell's, so tracebacks, graph breaks and the
placement log point at the cell's own lines. A trailing expression becomes an extra result, shown
as the cell's value. Constructs that do not survive the rewrite raise :class:`CellRewriteError`
with how to restructure the cell.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import types
from dataclasses import dataclass
from typing import Any

FUNC_NAME = "__trn_cell__"
VALUE_NAME = "__trn_value__"


class CellRewriteError(ValueError):
    """The cell uses a construct that cannot become a function body; the message says what to do."""

    def __init__(self, message: str, lineno: int) -> None:
        super().__init__(f"line {lineno}: {message}")
        self.lineno = lineno


@dataclass(frozen=True)
class CellFunction:
    """The rewritten cell: its code object, parameters and results (``value`` if it ends in an expression)."""

    code: types.CodeType
    params: tuple[str, ...]
    results: tuple[str, ...]
    has_value: bool

    def make(self, namespace: dict[str, Any]) -> types.FunctionType:
        """The function, with ``namespace`` as its globals (for modules, functions and classes it uses)."""
        scope: dict[str, Any] = {}
        exec(self.code, namespace, scope)
        return scope[FUNC_NAME]


class _Analyzer(ast.NodeVisitor):
    """Walks the top-level scope of a cell in evaluation order."""

    def __init__(self) -> None:
        self.written: set[str] = set()
        self.read_first: list[str] = []
        self.assigned: list[str] = []
        self.conditional: set[str] = set()
        self.deleted: set[str] = set()
        self.depth = 0  # nesting in compound statements whose body may not run

    def _bind(self, name: str) -> None:
        if name not in self.written and name not in self.assigned:
            self.assigned.append(name)
        if self.depth and name not in self.written:
            self.conditional.add(name)
        self.written.add(name)

    def _read(self, name: str) -> None:
        if name not in self.written and name not in self.read_first:
            self.read_first.append(name)

    # -- forbidden constructs --------------------------------------------------------------------
    def visit_Return(self, node: ast.Return) -> None:
        raise CellRewriteError(
            "`return` cannot be used in a %%trn compile cell: the cell becomes a function whose assigned names "
            "are written back. Assign the value to a name instead (e.g. `out = ...`).",
            node.lineno,
        )

    def _yield(self, node: ast.expr) -> None:
        raise CellRewriteError(
            "`yield` would turn the cell into a generator, which cannot be compiled. Collect the values in a "
            "list (or a tensor), or define the generator with `def` in an ordinary cell.",
            node.lineno,
        )

    visit_Yield = visit_YieldFrom = _yield

    def visit_Await(self, node: ast.Await) -> None:
        raise CellRewriteError("`await` cannot be compiled; run asynchronous code in an ordinary cell.", node.lineno)

    def visit_Global(self, node: ast.Global | ast.Nonlocal) -> None:
        kind = "global" if isinstance(node, ast.Global) else "nonlocal"
        raise CellRewriteError(
            f"`{kind} {', '.join(node.names)}` is not needed in a %%trn compile cell: every name the cell assigns "
            "is written back to the notebook. Remove the statement.",
            node.lineno,
        )

    visit_Nonlocal = visit_Global

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if any(a.name == "*" for a in node.names):
            raise CellRewriteError(
                f"`from {node.module} import *` cannot be compiled; import it in an ordinary cell first.", node.lineno
            )
        for a in node.names:
            self._bind(a.asname or a.name)

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self._bind(a.asname or a.name.split(".")[0])

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            if isinstance(target, ast.Name):
                if target.id not in self.written:
                    raise CellRewriteError(
                        f"`del {target.id}` removes a notebook name, which a compiled cell receives as an input and "
                        f"cannot delete. Delete it in an ordinary cell after this one (`del {target.id}`).",
                        node.lineno,
                    )
                self.deleted.add(target.id)
            else:
                self.visit(target)

    # -- scopes --------------------------------------------------------------------------------
    def _nested(self, node: ast.AST, name: str | None) -> None:
        # Decorators, defaults and bases are evaluated here; the body's free names are reads too.
        for child in ast.iter_child_nodes(node):
            self._scan_reads(child)
        if name is not None:
            self._bind(name)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._nested(node, node.name)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._nested(node, node.name)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._nested(node, None)

    def _scan_reads(self, node: ast.AST) -> None:
        # Names bound inside (comprehension targets, arguments, inner assignments) are not reads of ours.
        inner = {s.id for s in ast.walk(node) if isinstance(s, ast.Name) and not isinstance(s.ctx, ast.Load)}
        inner |= {a.arg for a in ast.walk(node) if isinstance(a, ast.arg)}
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.id not in inner:
                self._read(sub.id)

    def _comprehension(self, node: ast.AST) -> None:
        for sub in ast.walk(node):
            if isinstance(sub, ast.NamedExpr) and isinstance(sub.target, ast.Name):
                self._bind(sub.target.id)  # a walrus in a comprehension binds in the enclosing scope
        self._scan_reads(node)

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    # -- evaluation order ------------------------------------------------------------------------
    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self._read(node.id)
        else:
            self._bind(node.id)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for t in node.targets:
            self.visit(t)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name):
            self._read(node.target.id)
        self.visit(node.value)
        self.visit(node.target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
            self.visit(node.target)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self.visit(node.target)

    def _conditional(self, node: ast.AST) -> None:
        self.depth += 1
        try:
            self.generic_visit(node)
        finally:
            self.depth -= 1

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self.visit(node.iter)
        self._conditional(ast.Module(body=[ast.Expr(node.target), *node.body, *node.orelse], type_ignores=[]))

    visit_AsyncFor = visit_For

    def visit_If(self, node: ast.If | ast.While) -> None:
        self.visit(node.test)
        self._conditional(ast.Module(body=[*node.body, *node.orelse], type_ignores=[]))

    visit_While = visit_If

    def visit_Try(self, node: ast.AST) -> None:
        self._conditional(node)

    visit_TryStar = visit_Match = visit_Try

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.type is not None:
            self.visit(node.type)
        for stmt in node.body:
            self.visit(stmt)
        if node.name:
            self.deleted.add(node.name)  # Python unbinds `except E as name` at the end of the handler


def _is_global_like(value: object) -> bool:
    return inspect.ismodule(value) or inspect.isclass(value) or inspect.isroutine(value)


def rewrite_cell(
    source: str, namespace: dict[str, Any], filename: str = "<trn cell>", *, first_line: int = 1
) -> CellFunction:
    """Turn cell ``source`` into a :class:`CellFunction` over ``namespace``.

    ``first_line`` is the line number the source's first line carries (2 below a ``%%trn`` line).

    Raises :class:`CellRewriteError` for ``return``, ``yield``, ``await``, ``global``/``nonlocal``,
    ``del`` of a notebook name and ``import *``, and ``SyntaxError`` for invalid source.
    """
    tree = ast.parse(source, filename)
    if first_line != 1:
        ast.increment_lineno(tree, first_line - 1)
    if not tree.body:
        raise CellRewriteError("the cell is empty; write the code to compile below the %%trn compile line.", 1)
    analyzer = _Analyzer()
    for stmt in tree.body:
        analyzer.visit(stmt)
    body = list(tree.body)
    has_value = isinstance(body[-1], ast.Expr)
    if has_value:
        last = body[-1]
        assign = ast.Assign(targets=[ast.Name(VALUE_NAME, ast.Store())], value=last.value)  # type: ignore[attr-defined]
        body[-1] = ast.copy_location(assign, last)
    results = [n for n in analyzer.assigned if n not in analyzer.deleted]
    params = [
        n
        for n in analyzer.read_first
        if (n in namespace and not _is_global_like(namespace[n]) and not hasattr(builtins, n)) or n in analyzer.written
    ]
    # Conditionally assigned results that the notebook already holds come in too, so they are always bound.
    params += [n for n in results if n in analyzer.conditional and n in namespace and n not in params]
    params = [n for n in params if n in namespace]
    out_names = results + ([VALUE_NAME] if has_value else [])
    last_line = body[-1].end_lineno or body[-1].lineno
    ret = ast.Return(value=ast.Tuple(elts=[ast.Name(n, ast.Load()) for n in out_names], ctx=ast.Load()))
    for node in ast.walk(ret):
        node.lineno, node.end_lineno, node.col_offset, node.end_col_offset = last_line, last_line, 0, 0  # type: ignore[attr-defined]
    func = ast.parse(f"def {FUNC_NAME}({', '.join(params)}):\n    pass").body[0]
    assert isinstance(func, ast.FunctionDef)
    func.body = [*body, ret]
    for node in ast.walk(func.args):
        node.lineno = node.end_lineno = 1  # type: ignore[attr-defined]
    func.lineno, func.end_lineno = 1, last_line
    module = ast.Module(body=[func], type_ignores=[])
    ast.fix_missing_locations(module)
    code = compile(module, filename, "exec")
    return CellFunction(code=code, params=tuple(params), results=tuple(results), has_value=has_value)
