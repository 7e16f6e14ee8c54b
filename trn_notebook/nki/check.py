"""``check(kernel, reference_fn, *inputs)``: a kernel against its PyTorch reference, tile by tile.

Runs the kernel on the simulator and the reference on the CPU, compares every output with
``|got - want| <= atol + rtol * |want|``, and reports the maximum error of each output tile
(128 rows x 512 columns by default) as a small heat map. It also runs the reference op by op on
the ``neuron`` device to set the kernel's modeled time beside the reference ops' modeled time, and
reports AWS's three-way numerics ratio per output, |kernel − FP32| / |CPU BF16 − FP32| in L-inf and L2
(threshold 1.5; :mod:`trn_notebook.aws_ratio`), with the reference run on FP32 and on BF16 inputs.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from typing import Any

import torch

from ..aws_ratio import NumericsRatio, numerics_ratio
from ..display.format import fmt_ratio, fmt_s, fmt_speedup
from .jit import Kernel, as_kernel
from .report import KernelReport


@dataclass
class TileErrors:
    """Per-tile maximum absolute error of one output (rows x cols of tiles) and the tolerance check."""

    shape: tuple[int, ...]
    tile: tuple[int, int]
    max_err: list[list[float]]
    bad: list[list[bool]]

    @property
    def worst(self) -> float:
        return max((max(r) for r in self.max_err), default=0.0)


@dataclass
class CheckResult:
    """Outcome of :func:`check`: pass/fail, per-tile errors and modeled kernel vs reference time."""

    passed: bool
    rtol: float
    atol: float
    outputs: list[TileErrors]
    kernel_s: float
    reference_s: float
    report: KernelReport
    notes: list[str] = field(default_factory=list)
    ratios: list[NumericsRatio | None] = field(default_factory=list)  # per output; None: not a float output

    @property
    def ratio_passed(self) -> bool | None:
        """Every float output's AWS ratio below 1.5 (L-inf and L2); ``None`` when no ratio could be computed."""
        known = [r for r in self.ratios if r is not None]
        return all(r.passed for r in known) if known else None

    def __bool__(self) -> bool:
        return self.passed

    @property
    def speedup(self) -> float:
        """Modeled reference time over modeled kernel time (both include their launches)."""
        return self.reference_s / self.kernel_s if self.kernel_s > 0 else math.inf

    def text(self) -> str:
        """One line per output plus the modeled times."""
        lines = [f"{'PASS' if self.passed else 'FAIL'} (rtol={self.rtol:g}, atol={self.atol:g})"]
        for i, o in enumerate(self.outputs):
            bad = sum(sum(r) for r in o.bad)
            lines.append(
                f"  output {i} {o.shape}: max |error| {fmt_ratio(o.worst)}; {bad} of {sum(map(len, o.bad))} tiles out of tolerance"
            )
            ratio = self.ratios[i] if i < len(self.ratios) else None
            if ratio is not None:
                lines.append(f"    {ratio.label()}")
        lines.append(
            f"  modeled: kernel {fmt_s(self.kernel_s)} vs reference ops {fmt_s(self.reference_s)} "
            f"on the device ({fmt_speedup(self.speedup)})"
        )
        return "\n".join(lines + [f"  note: {n}" for n in self.notes])

    def __repr__(self) -> str:
        return self.text()

    def heatmap_html(self, index: int = 0) -> str:
        """The per-tile max error of output ``index`` as an HTML table (red = out of tolerance)."""
        o = self.outputs[index]
        top = o.worst or 1.0
        rows = []
        for r, (errs, bads) in enumerate(zip(o.max_err, o.bad)):
            cells = []
            for e, b in zip(errs, bads):
                shade = 0 if not math.isfinite(e) else int(200 * (1 - min(1.0, e / top)))
                color = "#d62728" if b else f"rgb({shade},{230},{shade})"
                cells.append(f'<td title="{fmt_ratio(e)}" style="background:{color};width:18px;height:14px"></td>')
            rows.append(f"<tr><th style='font-size:9px'>{r * o.tile[0]}</th>{''.join(cells)}</tr>")
        return (
            f"<div><small>max |error| per {o.tile[0]}x{o.tile[1]} tile of output {index} {o.shape} "
            f"(red: beyond atol + rtol·|want|)</small><table style='border-collapse:collapse'>{''.join(rows)}</table></div>"
        )

    def _repr_html_(self) -> str:
        maps = "".join(self.heatmap_html(i) for i in range(len(self.outputs)))
        return f"<pre>{html.escape(self.text())}</pre>{maps}"


def _tiles(got: torch.Tensor, want: torch.Tensor, rtol: float, atol: float, tile: tuple[int, int]) -> TileErrors:
    g = got.detach().float().reshape(-1, got.shape[-1] if got.dim() else 1)
    w = want.detach().float().reshape(g.shape)
    err = (g - w).abs()
    err = torch.where(torch.isnan(g) != torch.isnan(w), torch.full_like(err, math.inf), torch.nan_to_num(err, nan=0.0))
    bad = err > atol + rtol * w.abs()
    th, tw = tile
    max_err, bad_tiles = [], []
    for r in range(0, g.shape[0], th):
        max_err.append([float(err[r : r + th, c : c + tw].max()) for c in range(0, g.shape[1], tw)])
        bad_tiles.append([bool(bad[r : r + th, c : c + tw].any()) for c in range(0, g.shape[1], tw)])
    return TileErrors(tuple(got.shape), tile, max_err, bad_tiles)


def _reference_device_seconds(reference_fn: Any, inputs: tuple[Any, ...]) -> float:
    """Modeled device time of ``reference_fn`` run op by op on ``neuron`` (launches included)."""
    from ..device.clocks import clocks

    moved = [a.to("neuron") if isinstance(a, torch.Tensor) else a for a in inputs]
    before = clocks.snapshot().sim_device_s
    with torch.no_grad():
        reference_fn(*moved)
    return float(clocks.snapshot().sim_device_s - before)


def _cast(inputs: tuple[Any, ...], dtype: torch.dtype) -> tuple[Any, ...]:
    return tuple(a.to(dtype) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in inputs)


def _ratios(
    reference_fn: Any, inputs: tuple[Any, ...], got: list[torch.Tensor]
) -> tuple[list[NumericsRatio | None], str]:
    """The AWS ratio of each kernel output against the reference on FP32 and on BF16 (CPU) inputs."""
    try:
        with torch.no_grad():
            fp32, bf16 = reference_fn(*_cast(inputs, torch.float32)), reference_fn(*_cast(inputs, torch.bfloat16))
    except Exception as exc:  # the reference need not run in BF16 (e.g. it builds float32 tensors itself)
        return [], f"AWS ratio missing: the reference does not run on BF16 inputs ({type(exc).__name__}: {exc})"
    f_list = list(fp32) if isinstance(fp32, tuple | list) else [fp32]
    b_list = list(bf16) if isinstance(bf16, tuple | list) else [bf16]
    ratios: list[NumericsRatio | None] = []
    for g, f, b in zip(got, f_list, b_list):
        floats = all(isinstance(t, torch.Tensor) and t.is_floating_point() for t in (g, f, b))
        ratios.append(numerics_ratio(g, f, b) if floats and g.numel() else None)
    return (
        ratios,
        "AWS ratio = |kernel - FP32| / |CPU BF16 - FP32| (pass < 1.5, L-inf and L2): reference on FP32 / BF16 inputs",
    )


def check(
    kernel: Kernel | Any,
    reference_fn: Any,
    *inputs: Any,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    tile: tuple[int, int] = (128, 512),
) -> CheckResult:
    """Compare ``kernel(*inputs)`` with ``reference_fn(*inputs)``; returns a :class:`CheckResult` (truthy if it passes).

    The result also carries AWS's numerics ratio per output (``ratios``, ``ratio_passed``). Raises
    :class:`~trn_notebook.nki.NkiError` if the kernel breaks a hardware rule, and
    ``ValueError`` if the kernel and the reference return different numbers or shapes of outputs.
    """
    from ..device import costmodel as device_costmodel

    k = as_kernel(kernel)
    cpu_inputs = tuple(a.cpu() if isinstance(a, torch.Tensor) else a for a in inputs)
    run = k.run(*cpu_inputs)
    with torch.no_grad():
        want = reference_fn(*cpu_inputs)
    got_list = list(run.outputs) if isinstance(run.outputs, tuple) else [run.outputs]
    want_list = list(want) if isinstance(want, tuple | list) else [want]
    if len(got_list) != len(want_list):
        raise ValueError(f"the kernel returned {len(got_list)} outputs, the reference {len(want_list)}")
    outputs = []
    for i, (g, w) in enumerate(zip(got_list, want_list)):
        if tuple(g.shape) != tuple(w.shape):
            raise ValueError(f"output {i}: kernel shape {tuple(g.shape)} differs from reference shape {tuple(w.shape)}")
        outputs.append(_tiles(g, w, rtol, atol, tile))
    passed = not any(any(any(r) for r in o.bad) for o in outputs)
    launch = device_costmodel.get_cost_constants().eager_launch_s
    kernel_s = run.report.modeled_s + launch
    reference_s = _reference_device_seconds(reference_fn, cpu_inputs)
    notes = ["times are modeled (engine-level model for the kernel, the device's eager op model for the reference)"]
    ratios, ratio_note = _ratios(reference_fn, cpu_inputs, got_list)
    notes.append(ratio_note)
    return CheckResult(passed, rtol, atol, outputs, kernel_s, reference_s, run.report, notes, ratios)
