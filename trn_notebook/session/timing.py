"""``%timeit`` made correct for an asynchronous device (``%trn timeit``).

:func:`timeit` synchronises the device at the boundary of every timed run
(``torch.neuron.synchronize()`` before the clock starts and before it stops), times the first call
(which includes any compile) apart from the warm-up and the steady runs, and reports wall time and
modeled device time side by side. ``sync=False`` times enqueue only and says so.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..device.clocks import clocks
from ..results import Card, Result, fmt_s

AUTO_TARGET_S = 0.05  # auto-chosen loops per run aim at this much wall time
AUTO_MAX_LOOPS = 1000


def _sync() -> None:
    from ..device.module import synchronize

    synchronize()


@dataclass(repr=False)
class TimeitResult(Result):
    """First call, warm-up and steady-state timings (per loop) with the boundary that was timed."""

    statement: str
    loops: int
    repeats: int
    warmup: int
    synced: bool
    first_wall_s: float
    first_device_s: float
    wall_s: list[float]  # per loop, one value per repeat
    device_s: list[float]

    @property
    def boundary(self) -> str:
        """What the clock measured."""
        if self.synced:
            return "synchronised: torch.neuron.synchronize() before the clock starts and before it stops"
        return "enqueue only (--no-sync): the clock stops while device work may still be queued"

    @property
    def best_s(self) -> float:
        """Best wall time per loop over the repeats."""
        return min(self.wall_s)

    def parts(self) -> list[Result]:
        mean = statistics.fmean(self.wall_s)
        std = statistics.pstdev(self.wall_s) if len(self.wall_s) > 1 else 0.0
        dev = statistics.fmean(self.device_s)
        title = f"%trn timeit{'' if self.synced else ' (enqueue only)'}: {self.statement}"
        return [
            Card(
                title,
                [
                    (
                        "first call (incl. any compile)",
                        f"wall {fmt_s(self.first_wall_s)} · modeled device {fmt_s(self.first_device_s)}",
                    ),
                    ("warm-up", f"{self.warmup} call{'s' if self.warmup != 1 else ''} (not timed)"),
                    (
                        "steady state",
                        f"wall {fmt_s(mean)} ± {fmt_s(std)} per loop (best {fmt_s(self.best_s)}) · "
                        f"modeled device {fmt_s(dev)} per loop",
                    ),
                    ("runs", f"{self.repeats} runs × {self.loops} loops"),
                    ("boundary", self.boundary),
                ],
            )
        ]


def timeit(
    fn: Callable[[], object],
    *,
    number: int | None = None,
    repeat: int = 3,
    warmup: int = 1,
    sync: bool = True,
    statement: str = "",
) -> TimeitResult:
    """Time ``fn()``: first call, ``warmup`` untimed calls, then ``repeat`` runs of ``number`` loops.

    ``number=None`` picks loops so a run takes about 50 ms (at most 1000). Raises ``ValueError`` for
    non-positive counts, and whatever ``fn`` raises.
    """
    if (number is not None and number < 1) or repeat < 1 or warmup < 0:
        raise ValueError("-n and -r must be at least 1 and --warmup at least 0")
    boundary = _sync if sync else (lambda: None)

    def run(loops: int) -> tuple[float, float]:
        boundary()
        d0 = clocks.snapshot()["sim_device_s"]
        t0 = time.perf_counter()
        for _ in range(loops):
            fn()
        boundary()
        return time.perf_counter() - t0, float(clocks.snapshot()["sim_device_s"] - d0)

    first_wall, first_dev = run(1)
    warm_wall = first_wall
    for _ in range(warmup):
        warm_wall, _ = run(1)
    if number is None:
        number = max(1, min(AUTO_MAX_LOOPS, int(AUTO_TARGET_S / max(warm_wall, 1e-9))))
    walls, devs = [], []
    for _ in range(repeat):
        w, d = run(number)
        walls.append(w / number)
        devs.append(d / number)
    return TimeitResult(statement, number, repeat, warmup, sync, first_wall, first_dev, walls, devs)
