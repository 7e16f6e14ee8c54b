"""One place for how figures are written: units, names of stages and chips, the meaning of "modeled".

Results (:mod:`trn_notebook.display.results`), widgets, the migration report, the compiler's texts and the
status-bar payload all format through these functions, so 12.3 ms, 1,536 bytes or a stage name read
the same everywhere; the JupyterLab extension and the widgets' JavaScript show strings formatted here
(they format nothing). A leaf module: it imports nothing from trn_notebook, so every layer may use it.
"""

from __future__ import annotations

import html

# Stages of ``explain()`` / ``%trn explain --stage`` and the compiler texts each one shows.
EXPLAIN_STAGES: dict[str, tuple[str, ...]] = {
    "fx": ("fx",),
    "aten": ("aten_forward", "aten_backward"),
    "ir": ("ir",),
    "passes": ("passes",),
    "schedule": ("schedule",),
}
# Stages of one compile, as timed in the compile log (``stage_us``), and how they are labelled.
COMPILE_STAGES: tuple[str, ...] = ("capture", "aot", "lower", "passes", "codegen", "cache_write")
COMPILE_STAGE_LABELS: dict[str, str] = {
    "capture": "dynamo tracing",
    "aot": "AOTAutograd",
    "lower": "lowering",
    "passes": "passes",
    "codegen": "codegen",
    "cache_write": "cache write",
}

MODELED = (
    "modeled: a time from the simulator's cost model, never measured on this machine. A device op costs its "
    "kernel (roofline of FLOPs and HBM bytes, plus launch); a CPU fallback costs the modeled copies to the host "
    "and back plus a modeled host compute (a roofline on the host CPU), never a first-call wall time."
)


def esc(value: object) -> str:
    """``str(value)`` escaped for HTML element content and quoted attributes."""
    return html.escape(str(value), quote=True)


def fmt_bytes(n: float) -> str:
    """Bytes in binary units with two decimals: ``1.50 KiB``, ``24.00 GiB``, ``512 B``."""
    sign = "-" if n < 0 else ""
    n = abs(n)
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{sign}{n / size:.2f} {unit}"
    return f"{sign}{int(n)} B"


def fmt_s(seconds: float) -> str:
    """Seconds with a readable unit and three significant decimals: ``12.300 ms``, ``4.56 µs``, ``1.250 s``."""
    a = abs(seconds)
    if a >= 1:
        return f"{seconds:.3f} s"
    if a >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    if a >= 1e-6:
        return f"{seconds * 1e6:.2f} µs"
    if a == 0:
        return "0 s"
    return f"{seconds * 1e9:.1f} ns"


def fmt_ms(seconds: float) -> str:
    """Seconds as milliseconds with three decimals (table columns headed "ms"): ``12.300``."""
    return f"{seconds * 1e3:.3f}"


def fmt_pct(part: float, whole: float) -> str:
    """``part`` as a percentage of ``whole`` with one decimal (``0.0%`` when ``whole`` is 0)."""
    return f"{100.0 * part / whole if whole else 0.0:.1f}%"


def plural(n: int, word: str, words: str | None = None) -> str:
    """``1 graph``, ``3 graphs``."""
    return f"{n} {word if n == 1 else (words or word + 's')}"


# The placement tables' host_ms column: the laptop's wall time spent in the op (simulator and copies included),
# not the modeled host clock (the modeled figures are the device columns). JS twin: widgets/static/placement.js.
WALL_MS = "wall ms (this machine)"
COMPILE_MODELED_LABEL = "modeled Neuron compile"
COMPILE_MEASURED_LABEL = "measured (simulator)"


def fmt_duration(seconds: float) -> str:
    """A long duration (compile, load, amortisation): ``8.4 s``, ``3.9 min``, ``2.1 h``; short ones as :func:`fmt_s`."""
    if abs(seconds) >= 3600:
        return f"{seconds / 3600:.1f} h"
    if abs(seconds) >= 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.1f} s" if abs(seconds) >= 1 else fmt_s(seconds)


def fmt_compile(measured_s: float | None, modeled_s: float | None) -> str:
    """A compile time as every view shows it: our compiler's measured wall time beside the modeled
    Neuron compiler's, each labelled (``measured (simulator) 1.007 s · modeled Neuron compile 3.9 min``);
    a figure that is not known reads ``n/a``."""
    measured = fmt_s(measured_s) if measured_s is not None else "n/a"
    modeled = fmt_duration(modeled_s) if modeled_s is not None else "n/a"
    return f"{COMPILE_MEASURED_LABEL} {measured} · {COMPILE_MODELED_LABEL} {modeled}"


def fmt_compile_brief(measured_s: float, modeled_s: float | None) -> str:
    """A compile time for a one-line view (the status bar, whose tooltip carries :func:`fmt_compile`): the
    modeled Neuron compile when known (``modeled compile 3.9 min``), else our measured wall time
    (``compile 1.007 s measured``); same units as :func:`fmt_compile`."""
    if modeled_s is not None:
        return f"modeled compile {fmt_duration(modeled_s)}"
    return f"compile {fmt_s(measured_s)} measured"


def fmt_ratio(value: float) -> str:
    """A numerics ratio or error with three significant digits: ``1.02``, ``0.000153``, ``inf``, ``0``."""
    if value != value:  # NaN: not computed
        return "n/a"
    if value in (float("inf"), float("-inf")):
        return "inf" if value > 0 else "-inf"
    return "0" if value == 0 else f"{value:.3g}"


def fmt_share(value: float) -> str:
    """A share in [0, 1] as a percentage with one decimal: ``28.1%``."""
    return f"{100.0 * value:.1f}%"


def fmt_speedup(value: float) -> str:
    """A speed-up (one time over another) with two decimals: ``2.10x``; ``inf`` when the divisor was 0."""
    return "inf" if value == float("inf") else f"{value:.2f}x"


def fmt_rate(per_s: float, unit: str) -> str:
    """A throughput with one decimal and its unit per second: ``184.4 tokens/s``, ``12.0 samples/s``."""
    return f"{per_s:.1f} {unit}/s"
