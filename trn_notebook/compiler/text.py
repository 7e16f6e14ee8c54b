"""IR text: a readable printer and a strict parser (the cache stores and reloads this text).

Format (one node per line; the user's source line, when known, as a trailing comment)::

    graph mlp_forward_0(%a0: f32[8,16], %a1: f32[32,16]) {
      %v0: f32[16,32] = permute(%a1, [1, 0])
      %v1: f32[8,32] = mm(%a0, %v0) {k=0, mem=[0]}  # model.py:12
      return (%v1, None)
    }

The parser accepts exactly what the printer writes: unknown ops, undefined values, malformed
types or trailing garbage raise :class:`~trn_notebook.compiler.ir.IRError`. Nothing is evaluated.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ..device.source_lines import parse_source
from .ir import DTYPES, DType, Graph, IRError, Node, Ref, TensorType
from .verify import verify

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_TYPE_RE = re.compile(r"^(" + "|".join(sorted(DTYPES, key=len, reverse=True)) + r")\[([0-9,]*)(?:;([0-9,]*))?\]$")
_HEADER_RE = re.compile(r"^graph (" + _NAME + r")\((.*)\) \{$")
_META_RE = re.compile(r"^  ;; (" + _NAME + r") = (.*)$")
_OP_RE = re.compile(_NAME + r"\(")
_ANNOT_RE = re.compile(r"\{k=(-?\d{1,9})(?:, mem=\[([-0-9, ]*)\])?\}")
_RESULT_RE = re.compile(r"%(" + _NAME + r"): (\S+)")
MAX_TEXT_CHARS = 64 << 20  # a whole graph's text
MAX_LINE_CHARS = 1 << 20  # one node
MAX_NODES = 200_000
MAX_DEPTH = 8  # nested lists in arguments (the printer writes at most 2)
_RETURN_RE = re.compile(r"^  return \((.*)\)$")


# -- printing ----------------------------------------------------------------------------------
def format_value(v: Any) -> str:
    """One argument as IR text."""
    if isinstance(v, Ref | DType):
        return str(v)
    if v is None or isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        text = repr(v)
        return text if any(c in text for c in ".en") else text + ".0"
    if isinstance(v, complex):  # complex scalars (complex mul backward: ``x * 1j``), parsed by complex()
        text = repr(v)
        return text if text.startswith("(") else f"({text})"
    if isinstance(v, str):
        if "'" in v or "\\" in v or "\n" in v or "#" in v:
            raise IRError(f"string constant {v!r} cannot be printed")
        return f"'{v}'"
    if isinstance(v, list | tuple):
        return "[" + ", ".join(format_value(x) for x in v) + "]"
    raise IRError(f"constant of type {type(v).__name__} cannot appear in IR: {v!r}")


def format_node(n: Node) -> str:
    """One node as a line of IR text (without the leading indentation)."""
    lhs = ", ".join(f"%{o or '_'}: {t if t is not None else 'none'}" for o, t in zip(n.outs, n.types))
    parts = [format_value(a) for a in n.args] + [f"{k}={format_value(v)}" for k, v in n.kwargs]
    text = f"{lhs} = {n.op}({', '.join(parts)})"
    if n.kernel is not None:
        mem = "" if n.mem is None else ", mem=[" + ", ".join(str(m) for m in n.mem) + "]"
        text += f" {{k={n.kernel}{mem}}}"
    if n.source:
        text += f"  # {n.source}"
    return text


def print_graph(g: Graph) -> str:
    """The whole graph as IR text (deterministic: same graph, same text)."""
    ins = ", ".join(f"%{name}: {t}" for name, t in g.inputs)
    lines = [f"graph {g.name}({ins}) {{"]
    lines += [f"  ;; {k} = {v}" for k, v in g.meta]
    lines += ["  " + format_node(n) for n in g.nodes]
    outs = ", ".join("None" if o is None else str(o) for o in g.outputs)
    lines += [f"  return ({outs})", "}"]
    return "\n".join(lines) + "\n"


# -- parsing -----------------------------------------------------------------------------------
def parse_type(text: str) -> TensorType:
    """Parse ``f32[8,16]`` (or ``f32[8,16;1,8]`` with strides); raises ``IRError``."""
    m = _TYPE_RE.match(text.strip())
    if not m:
        raise IRError(f"bad tensor type {text!r}; expected e.g. f32[8,16]")
    shape = tuple(int(s) for s in m.group(2).split(",")) if m.group(2) else ()
    strides = None
    if m.group(3) is not None:
        strides = tuple(int(s) for s in m.group(3).split(",")) if m.group(3) else ()
        if len(strides) != len(shape):
            raise IRError(f"bad tensor type {text!r}: strides and shape differ in rank")
    return TensorType(m.group(1), shape, strides)


class _Values:
    """Recursive-descent reader of an argument list."""

    _TOKEN = re.compile(
        r"\s*(?:(?P<ref>%" + _NAME + r")|(?P<num>-?(?:\d+\.\d*(?:e[-+]?\d+)?|\d+e[-+]?\d+|\d+)(?![\w.]))"
        r"|(?P<cplx>\([-+0-9.einfa]*j\))|(?P<str>'[^'\\\n]*')|(?P<kw>"
        + _NAME
        + r")=|(?P<word>-?"
        + _NAME
        + r")|(?P<punct>[\[\],]))"
    )

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.end = len(text.rstrip())
        self.depth = 0

    def _next(self) -> tuple[str, str]:
        m = self._TOKEN.match(self.text, self.pos)
        if not m:
            raise IRError(f"cannot parse arguments at {self.text[self.pos : self.pos + 30]!r}")
        self.pos = m.end()
        kind = m.lastgroup or ""
        return kind, m.group(kind)

    def _peek(self) -> tuple[str, str] | None:
        if self.pos >= self.end:
            return None
        save = self.pos
        tok = self._next()
        self.pos = save
        return tok

    def value(self, kind: str, tok: str) -> Any:
        if kind == "ref":
            return Ref(tok[1:])
        if kind == "num":
            return float(tok) if any(c in tok for c in ".e") else int(tok)
        if kind == "cplx":
            return complex(tok)
        if kind == "str":
            return tok[1:-1]
        if kind == "word":
            words = {"None": None, "True": True, "False": False, "inf": math.inf, "-inf": -math.inf, "nan": math.nan}
            if tok in words:
                return words[tok]
            if tok in DTYPES:
                return DType(tok)
            raise IRError(f"unknown word {tok!r} in arguments")
        if kind == "punct" and tok == "[":
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise IRError(f"lists nested deeper than {MAX_DEPTH} levels in arguments")
            items: list[Any] = []
            while True:
                k, t = self._next()
                if k == "punct" and t == "]":
                    break
                items.append(self.value(k, t))
                k, t = self._next()
                if k == "punct" and t == "]":
                    break
                if not (k == "punct" and t == ","):
                    raise IRError(f"expected ',' or ']' in list, got {t!r}")
            self.depth -= 1
            return items
        raise IRError(f"unexpected {tok!r} in arguments")

    def arguments(self) -> tuple[tuple[Any, ...], tuple[tuple[str, Any], ...]]:
        args: list[Any] = []
        kwargs: list[tuple[str, Any]] = []
        while self._peek() is not None:
            kind, tok = self._next()
            if kind == "kw":
                k, t = self._next()
                kwargs.append((tok, self.value(k, t)))
            elif kwargs:
                raise IRError("positional argument after keyword argument")
            else:
                args.append(self.value(kind, tok))
            if self._peek() is None:
                break
            k, t = self._next()
            if not (k == "punct" and t == ","):
                raise IRError(f"expected ',' between arguments, got {t!r}")
        return tuple(args), tuple(kwargs)


def _parse_lhs(text: str) -> tuple[tuple[str, ...], tuple[TensorType | None, ...]]:
    outs: list[str] = []
    types: list[TensorType | None] = []
    for part in text.split(", %"):
        m = _RESULT_RE.fullmatch(part if part.startswith("%") else "%" + part)
        if not m:
            raise IRError(f"bad result {part!r}; expected %name: f32[...]")
        outs.append("" if m.group(1) == "_" else m.group(1))
        types.append(None if m.group(2) == "none" else parse_type(m.group(2)))
    return tuple(outs), tuple(types)


def parse_graph(text: str) -> Graph:
    """Parse IR text written by :func:`print_graph`; raises ``IRError`` on anything else (strict)."""
    from .ops import OPS

    if len(text) > MAX_TEXT_CHARS:
        raise IRError(f"IR text of {len(text)} characters is above the limit of {MAX_TEXT_CHARS}")
    lines = text.rstrip("\n").split("\n")
    if len(lines) > MAX_NODES + 3:
        raise IRError(f"IR text has {len(lines)} lines, above the limit of {MAX_NODES}")
    if max(map(len, lines)) > MAX_LINE_CHARS:
        raise IRError(f"an IR line is longer than the limit of {MAX_LINE_CHARS} characters")
    if len(lines) < 3 or lines[-1] != "}":
        raise IRError("IR text is truncated (no closing '}')")
    head = _HEADER_RE.match(lines[0])
    if not head:
        raise IRError(f"bad graph header {lines[0][:60]!r}")
    inputs: list[tuple[str, TensorType]] = []
    if head.group(2):
        for part in head.group(2).split(", %"):
            name, _, typ = part.lstrip("%").partition(": ")
            if not re.fullmatch(_NAME, name):
                raise IRError(f"bad input name {name!r}")
            inputs.append((name, parse_type(typ)))
    nodes: list[Node] = []
    meta: list[tuple[str, str]] = []
    m_ret = _RETURN_RE.match(lines[-2])
    if not m_ret:
        raise IRError("IR text has no return line")
    for line in lines[1:-2]:
        mm = _META_RE.match(line)
        if mm:
            meta.append((mm.group(1), mm.group(2)))
            continue
        body, _, source = line.partition("  # ")
        lhs, op, arg_text, kernel, mem = _split_node(body, line)
        outs, types = _parse_lhs(lhs)
        if op not in OPS:
            raise IRError(f"unknown op {op!r} in IR text")
        args, kwargs = _Values(arg_text).arguments()
        nodes.append(Node(outs, types, op, args, kwargs, parse_source(source) if source else None, kernel, mem))
    out_args, _ = _Values(m_ret.group(1)).arguments()
    outputs = tuple(o if o is None or isinstance(o, Ref) else _bad_output(o) for o in out_args)
    g = Graph(head.group(1), tuple(inputs), tuple(nodes), outputs, tuple(meta))
    verify(g)
    return g


def _split_node(body: str, line: str) -> tuple[str, str, str, int | None, tuple[int, ...] | None]:
    """(results, op, argument text, kernel, mem) of one node line, in linear time; raises ``IRError``."""
    lhs, eq, rest = body[2:].partition(" = ") if body.startswith("  %") else ("", "", "")
    m = _OP_RE.match(rest)
    if not eq or not m:
        raise IRError(f"cannot parse IR line {line[:80]!r}")
    op, rest = rest[: m.end() - 1], rest[m.end() :]
    kernel = mem = None
    if rest.endswith("}"):
        cut = rest.rfind(") {k=")
        a = _ANNOT_RE.fullmatch(rest, cut + 2) if cut >= 0 else None
        if a is None:
            raise IRError(f"cannot parse IR line {line[:80]!r}")
        kernel = int(a.group(1))
        mem = tuple(int(x) for x in a.group(2).split(",") if x.strip()) if a.group(2) is not None else None
        rest = rest[: cut + 1]
    if not rest.endswith(")"):
        raise IRError(f"cannot parse IR line {line[:80]!r}")
    return lhs, op, rest[:-1], kernel, mem


def _bad_output(o: Any) -> Ref:
    raise IRError(f"graph output must be a value or None, got {o!r}")


# -- Python constants a graph returns ---------------------------------------------------------
CONSTANT_OUTPUTS = "constant_outputs"  # the graph.meta key: [[position, value], ...]


def format_constant_outputs(consts: dict[int, Any]) -> str:
    """``consts`` (output position -> int/float/bool) as the text of ``meta["constant_outputs"]``."""
    return format_value([[i, v] for i, v in sorted(consts.items())])


def constant_outputs(graph: Graph) -> dict[int, Any]:
    """The Python constants ``graph`` returns (AOT graphs of ``generate`` return ints such as a cache
    length), by output position; those positions hold ``None`` in ``graph.outputs``. Raises ``IRError``
    when the meta entry is malformed (e.g. a hand-edited cache file)."""
    text = dict(graph.meta).get(CONSTANT_OUTPUTS)
    if text is None:
        return {}
    args, kwargs = _Values(text).arguments()
    pairs: list[Any] = args[0] if len(args) == 1 and not kwargs and isinstance(args[0], list) else [None]
    found: dict[int, Any] = {}
    for pair in pairs:
        pos, value = pair if isinstance(pair, list) and len(pair) == 2 else (None, None)
        if type(pos) is not int or not 0 <= pos < len(graph.outputs) or not isinstance(value, int | float):
            raise IRError(f"graph {graph.name}: bad {CONSTANT_OUTPUTS} entry {text[:60]!r}")
        if graph.outputs[pos] is not None:
            raise IRError(f"graph {graph.name}: output {pos} is both a value and a constant")
        found[pos] = value
    return found
