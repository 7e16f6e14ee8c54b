"""Shell integration of ``%trn``: cell-aware source lines and warnings, tab completion."""

from __future__ import annotations

import linecache
import sys
import warnings
from typing import Any

from IPython.core.error import TryNext
from IPython.core.interactiveshell import InteractiveShell

from ..device.source_lines import format_source
from .parser import CELL_MODES, CHIPS, LINE_ONLY, STAGES, subparsers

COMPLETION_KEYS = ("%trn", "%%trn")


def install_warning_format(shell: InteractiveShell) -> None:
    """Name notebook cells in warnings: ``cell [3] line 2: NeuronFallbackWarning: …``; idempotent."""
    remove_warning_format(shell)
    previous = warnings.formatwarning

    def formatwarning(
        message: Warning | str, category: type[Warning], filename: str, lineno: int, line: str | None = None
    ) -> str:
        where = format_source(filename, lineno)
        if not where.startswith("cell ["):
            return previous(message, category, filename, lineno, line)
        text = (line if line is not None else linecache.getline(filename, lineno)).strip()
        return f"{where}: {category.__name__}: {message}\n" + (f"  {text}\n" if text else "")

    formatwarning.trn_shell = shell  # type: ignore[attr-defined]
    formatwarning.trn_previous = previous  # type: ignore[attr-defined]
    warnings.formatwarning = formatwarning  # type: ignore[assignment]


def remove_warning_format(shell: InteractiveShell) -> None:
    """Restore the warning formatter that was in force before :func:`install_warning_format`."""
    current = warnings.formatwarning
    if getattr(current, "trn_shell", None) is shell:
        warnings.formatwarning = current.trn_previous  # type: ignore[attr-defined]


# -- completion ------------------------------------------------------------------------------------
def _flags(name: str) -> list[str]:
    return [s for a in subparsers(name)._actions for s in a.option_strings if s.startswith("--") or s == "-n"]


def _compiled_names() -> list[str]:
    names: list[str] = []
    session = sys.modules.get("trn_notebook.session.compiled")
    if session is not None:
        names += list(session.compiled_cells())  # type: ignore[attr-defined]
    compiler = sys.modules.get("trn_notebook.compiler")
    shape_log = getattr(compiler, "shape_log", None)
    if shape_log is not None:
        names += [n for n in shape_log.snapshot() if n not in names]
    return names


def completions(line: str) -> list[str]:
    """Candidates for the last word of a ``%trn``/``%%trn`` line (the completer filters by prefix)."""
    words = line.split()
    cell_mode = bool(words) and words[0] == "%%trn"
    done = words[1:] if line.endswith((" ", "\t")) else words[1:-1]
    if not done:
        return [*CELL_MODES, "timeit"] if cell_mode else [*LINE_ONLY, "timeit"]
    command, prev = done[0], done[-1]
    if command not in (*CELL_MODES, *LINE_ONLY, "timeit"):
        return []
    if prev == "--chip":
        return list(CHIPS)
    if prev == "--stage":
        return list(STAGES)
    if prev in ("--dir", "--name", "--mode", "--option", "--buckets", "-n", "-r", "--warmup", "--cores"):
        return []
    positional = [w for w in done[1:] if not w.startswith("-")]
    extra: list[str] = []
    if command == "device" and not positional:
        extra = ["neuron", "cpu", "show"]
    elif command in ("explain", "shapes") and not positional:
        extra = _compiled_names()
    return extra + _flags(command)


def complete_hook(shell: InteractiveShell, event: Any) -> list[str]:
    """The ``complete_command`` hook for ``%trn`` and ``%%trn``."""
    result = completions(event.text_until_cursor.splitlines()[-1] if event.text_until_cursor else event.line)
    if not result:
        raise TryNext
    return result


def install_completion(shell: InteractiveShell) -> None:
    """Register :func:`complete_hook` for both ``%trn`` and ``%%trn``; idempotent."""
    remove_completion(shell)
    for key in COMPLETION_KEYS:
        shell.set_hook("complete_command", complete_hook, str_key=key)


def remove_completion(shell: InteractiveShell) -> None:
    """Remove our completion hooks, leaving any others."""
    dispatcher = shell.strdispatchers.get("complete_command")
    if dispatcher is None:
        return
    for key in COMPLETION_KEYS:
        chain = dispatcher.strs.get(key)
        if chain is not None:
            chain.chain = [(p, f) for p, f in chain.chain if getattr(f, "__func__", None) is not complete_hook]
            if not chain.chain:
                del dispatcher.strs[key]
