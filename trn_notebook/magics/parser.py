"""Argument parsing of ``%trn`` / ``%%trn``: one argparse subparser per subcommand.

Every parse error raises :class:`IPython.core.error.UsageError` (a message, no traceback) naming
what was wrong and the correct form; ``--help`` raises :class:`HelpRequested` carrying the text.
"""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Callable
from typing import NoReturn

from IPython.core.error import UsageError

from .. import state as _state
from ..device.chips import CHIPS as CHIP_SPECS
from ..display.format import EXPLAIN_STAGES

CELL_MODES = ("eager", "compile", "profile", "dryrun")  # only as %%trn
LINE_ONLY = (
    "device", "status", "ops", "memory", "cache", "shapes", "explain", "numerics", "report", "dashboard", "reset", "port-check", "plan", "help",
)  # fmt: skip
SUBCOMMANDS = (*LINE_ONLY[:1], *CELL_MODES, *LINE_ONLY[1:], "timeit")
STAGES = tuple(EXPLAIN_STAGES)
CHIPS = tuple(sorted(CHIP_SPECS))
_TIMEIT_VALUED = {"-n", "-r", "--warmup"}
AS_HELP = "also bind the report the cell shows to NAME in the notebook (as %%capture NAME does), for a check cell"


class HelpRequested(Exception):
    """``--help`` was given; ``text`` is the help to show."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class Parser(argparse.ArgumentParser):
    """An ArgumentParser that reports errors as ``UsageError`` and ``--help`` as :class:`HelpRequested`."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}\ncorrect form: {self.format_usage().strip()[7:]}")

    def print_help(self, file: object = None) -> None:
        raise HelpRequested(self.format_help())

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise UsageError(message or f"{self.prog}: invalid arguments")


def _int_at_least(minimum: int, what: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
        return value

    return parse


_positive = _int_at_least(1, "a positive integer")


def _identifier(text: str) -> str:
    import keyword

    if not text.isidentifier() or keyword.iskeyword(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a Python name")
    return text


def _size(text: str) -> int:
    from ..device.config import parse_bytes

    try:
        return parse_bytes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


_nonnegative = _int_at_least(0, "an integer ≥ 0")


def build_parser() -> Parser:
    """The ``%trn`` parser with a subparser per subcommand."""
    top = Parser(prog="%trn", description="trn-notebook: the neuron device from Jupyter.", allow_abbrev=False)
    sub = top.add_subparsers(dest="command", metavar="SUBCOMMAND", parser_class=Parser)
    sub.required = True

    def add(name: str, help: str) -> Parser:
        return sub.add_parser(name, help=help.replace("%", "%%"), description=help, allow_abbrev=False)

    p = add("device", "select the default device for new tensors (neuron or cpu), or show it")
    p.add_argument("target", nargs="?", choices=("neuron", "cpu", "show"), default="show")
    p.add_argument("--chip", choices=CHIPS, help="chip model of the simulator")
    p.add_argument("--cores", type=_positive, help="logical NeuronCores per chip")
    p.add_argument("--blocking", action=argparse.BooleanOptionalAction, help="every op is a sync point")
    p.add_argument("--fusion", action=argparse.BooleanOptionalAction, help="adaptive eager fusion")
    p.add_argument("--numerics", metavar="MODE[,K=V...]", help="numerics policy: exact | trainium[,autocast=matmult]")

    p = add("eager", "(%%trn) run the cell on the device and show what it did")
    p.add_argument("--fusion", action="store_true", help="adaptive eager fusion inside the cell")
    p.add_argument("--strict", action="store_true", help="any CPU fallback raises inside the cell")
    p.add_argument("--as", dest="as_name", type=_identifier, metavar="NAME", help=AS_HELP)

    p = add("compile", "(%%trn) compile the cell with the neuron backend, run it, write its results back")
    p.add_argument("--fullgraph", action="store_true", help="a graph break is an error")
    p.add_argument("--name", help="name of the compiled cell (for %%trn explain and %%trn shapes)")
    p.add_argument("--mode", help="compile mode (only 'default' has an effect)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="compiler option")
    p.add_argument("--buckets", metavar="SPEC", help="shape buckets: pow2:MIN-MAX | step:S:MIN-MAX | list:A,B,…")
    p.add_argument("--as", dest="as_name", type=_identifier, metavar="NAME", help=AS_HELP)

    from .profile import add_arguments as add_profile_arguments

    add_profile_arguments(
        add("profile", "(%%trn) profile the cell: timeline and why it is slow"), _positive, _nonnegative
    )
    p = add("dryrun", "(%%trn) run the cell shape-only on neuron: every figure modeled, nothing computed")
    p.add_argument("--capacity", type=_size, metavar="SIZE", help="modeled HBM per logical core, e.g. 24GiB")
    p.add_argument("--world-size", type=_positive, metavar="N", help="N ranks on torch's fake process group")
    p.add_argument(
        "--strict", action="store_true", help="stop at the first allocation over capacity, as the device does"
    )
    p = add("plan", "will it fit: dry-run a model under several TP x PP x FSDP/DP x AC layouts (trn_notebook.plan)")
    p.add_argument("model", help="a name in the notebook: a transformers config or a model factory")
    p.add_argument(
        "--layouts", default="", metavar="L", help="e.g. 'tp4,fsdp16+ac,tp32xdp32+zero1' (default: a standard set)"
    )
    p.add_argument("--batch", type=_positive, default=1, help="sequences per rank (default 1)")
    p.add_argument("--seq", type=_positive, default=2048, help="tokens per sequence (default 2048)")
    p.add_argument("--global-batch", type=_positive, help="sequences per optimizer step (accumulates microbatches)")
    p.add_argument("--master-weights", action="store_true", help="FP32 master weights, gradients and AdamW state")
    p.add_argument(
        "--execution", choices=("eager", "graph"), default="eager", help="price the step eager or as compiled graphs"
    )
    p.add_argument("--chip", choices=CHIPS, default="trn2")
    p.add_argument("--lnc", type=int, choices=(1, 2), help="logical NeuronCore config (default: the chip's; trn1: 1)")
    add("status", "device, memory, compile cache and fallbacks in one card")
    p = add("ops", "the op placement log")
    p.add_argument("--reset", action="store_true", help="clear the log after showing it")
    p.add_argument("--table", action="store_true", help="the op compatibility table (runs OpInfo samples; slow)")
    p.add_argument("--op", metavar="GLOBS", help="with --table: only these ops, e.g. 'add,nn.functional.*'")
    p.add_argument("--full", action="store_true", help="with --table: every sample, not the quick subset")
    p = add("memory", "device memory counters")
    p.add_argument("--snapshot", action="store_true", help="segments by owner and top allocation sites")
    p.add_argument("--reset-peak", action="store_true", help="reset the peaks to current values")
    p.add_argument("--empty-cache", action="store_true", help="release cached segments")
    p = add("cache", "the persistent compile cache")
    p.add_argument("--clear", action="store_true", help="delete every entry")
    p.add_argument("--dir", metavar="PATH", help="use PATH as the cache directory")
    p.add_argument("--export", metavar="BUNDLE", help="write this cache's entries to a checksummed data bundle")
    p.add_argument("--import", dest="import_", metavar="BUNDLE", help="import a bundle (needs --trust)")
    p.add_argument("--trust", action="store_true", help="with --import: you chose to trust this bundle's author")
    p = add("shapes", "observed input shapes per compiled callable")
    p.add_argument("name", nargs="?")
    p = add("explain", "every stage of a compilation (FX, ATen, IR, passes, schedule)")
    p.add_argument("name", nargs="?", help="a compiled cell name or a compiled callable in the namespace")
    p.add_argument("--stage", choices=STAGES)
    p = add("numerics", "three-way numerics: CPU FP32 vs CPU BF16 vs neuron per module (AWS ratio, first crossing)")
    p.add_argument("model", help="name of an nn.Module in the notebook")
    p.add_argument("inputs", help="name of its inputs: a tensor, a tuple of arguments or a dict of keyword arguments")
    p.add_argument("--numerics", metavar="MODE[,K=V...]", help="policy for this call: trainium[,autocast=matmult]")
    p.add_argument("--compiled", action="store_true", help="also compare the torch.compile(backend='neuron') output")
    p.add_argument("--threshold", type=float, default=1.5, help="AWS ratio threshold (default 1.5)")
    p.add_argument("--generate", type=_positive, metavar="N", help="also generate N greedy tokens (HF model)")
    add("report", "the migration report")
    add("dashboard", "status, placement, memory and compile cache together")
    p = add("reset", "start an exercise over: placement log, clocks, memory statistics, compile and shape logs")
    p.add_argument("--keep-compiled", action="store_true", help="keep compiled graphs in memory")
    p = add("port-check", "simulator-only calls in a notebook or script (default: this session's cells)")
    p.add_argument("path", nargs="?", default="", help="a .ipynb or .py file")
    add("help", "list the subcommands")
    p = add("timeit", "time a statement correctly on an asynchronous device")
    p.add_argument("-n", type=_positive, dest="number", help="loops per run (default: automatic)")
    p.add_argument("-r", type=_positive, dest="repeat", default=3, help="runs (default 3)")
    p.add_argument("--warmup", type=_nonnegative, default=1, help="untimed calls after the first (default 1)")
    p.add_argument("--no-sync", action="store_true", help="time enqueue only (labelled as such)")
    p.add_argument("statement", nargs="*", help="the statement (line mode) or setup (cell mode)")
    return top


_parser: Parser | None = None
_state.register("magic_parser", _state.Globals(__name__, "_parser"), reset=False)  # built once


def parser() -> Parser:
    """The shared parser (built once)."""
    global _parser
    if _parser is None:
        _parser = build_parser()
    return _parser


def subparsers(name: str) -> Parser:
    """The parser of subcommand ``name``."""
    action = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[name]


def _split_timeit(line: str) -> tuple[list[str], str]:
    """Split ``timeit [options] STATEMENT`` keeping the statement's text verbatim."""
    rest = line.strip()[len("timeit") :]
    tokens: list[str] = []
    while True:
        m = re.match(r"\s*(\S+)", rest)
        if m is None or not m.group(1).startswith("-") or re.fullmatch(r"-[\d.(]", m.group(1)[:2]):
            break
        tok = m.group(1)
        rest = rest[m.end() :]
        if tok == "--":
            break
        tokens.append(tok)
        if tok in _TIMEIT_VALUED:
            m = re.match(r"\s*(\S+)", rest)
            if m is not None:
                tokens.append(m.group(1))
                rest = rest[m.end() :]
    return tokens, rest.strip()


def parse(line: str, cell: str | None) -> argparse.Namespace:
    """Parse a ``%trn`` line (``cell`` is the body in cell mode); raises ``UsageError`` or :class:`HelpRequested`."""
    stripped = line.strip()
    if stripped.split(None, 1)[:1] == ["timeit"]:
        tokens, statement = _split_timeit(stripped)
        args, extra = parser().parse_known_args(["timeit", *tokens])
        if extra:
            subparsers("timeit").error(f"unrecognized arguments: {' '.join(extra)}")
        args.statement = statement
    else:
        try:
            argv = shlex.split(stripped)
        except ValueError as exc:
            raise UsageError(f"%trn: could not read the arguments ({exc}); quote values that contain spaces") from None
        if not argv:
            raise UsageError("%trn needs a subcommand; try `%trn help`. Subcommands: " + ", ".join(SUBCOMMANDS))
        args, extra = parser().parse_known_args(argv)
        if extra:  # report it against the subcommand, with the subcommand's correct form
            subparsers(args.command).error(f"unrecognized arguments: {' '.join(extra)}")
    if cell is None and args.command in CELL_MODES:
        raise UsageError(f"`{args.command}` is a cell mode: put `%%trn {args.command}` on the first line of a cell")
    if cell is not None and args.command in LINE_ONLY:
        raise UsageError(f"`{args.command}` is a line command: use `%trn {args.command}` (one %), not `%%trn`")
    if cell is None and args.command == "timeit" and not args.statement:
        raise UsageError("%trn timeit: no statement to time\ncorrect form: %trn timeit [-n N] [-r R] STATEMENT")
    return args


def help_text() -> str:
    """The one-screen summary shown by ``%trn help``."""
    return parser().format_help() + (
        "\ncell modes: %%trn eager [--fusion] [--strict] · %%trn compile [--fullgraph] [--name NAME] "
        "[--mode MODE] [--option K=V …] [--buckets SPEC] · %%trn timeit [options] [SETUP] · "
        "%%trn dryrun [--capacity SIZE] [--world-size N] [--strict] · "
        "%%trn profile [--steps N] [--warmup N] [--save PATH] · %%trn ranks N (and %trn ranks stop)\n"
        "every subcommand takes --help"
    )
