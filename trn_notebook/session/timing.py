"""``%timeit`` made correct for an asynchronous device (``%trn timeit``).

:func:`timeit` synchronises the device at the boundary of every timed run
(``torch.neuron.synchronize()`` before the clock starts and before it stops), times the first call
(which includes any compile) apart from the warm-up and the steady runs, and reports the modeled host
time (the figure that shows asynchrony: the simulator computes eagerly, so wall time cannot), modeled
device time and wall time. ``sync=False`` times enqueue only and says so.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .. import facts
from ..device.clocks import clocks
from ..display.results import Card, Result, fmt_s
from ..facts.base import NA

AUTO_TARGET_S = 0.05  # auto-chosen loops per run aim at this much wall time
AUTO_MAX_LOOPS = 1000


def _sync() -> None:
    facts.current().synchronize()


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
    first_host_s: float = 0.0
    sim_host_s: list[float] = field(default_factory=list)  # modeled host clock per loop, one per repeat
    simulated: bool = True  # False on hardware: no modeled clocks, the wall time is the measurement

    @property
    def host_s(self) -> float | None:
        """Modeled host time per loop (mean over repeats): what a real host spends, waiting at syncs included.

        The simulator computes every op eagerly, so wall time cannot show enqueue-only timing; this can.
        None on hardware, where there is no modeled clock (read the wall times).
        """
        if not self.simulated:
            return None
        return statistics.fmean(self.sim_host_s) if self.sim_host_s else 0.0

    @property
    def modeled_device_s(self) -> float | None:
        """Modeled device time per loop (mean over repeats); None on hardware (not modeled there)."""
        return statistics.fmean(self.device_s) if self.simulated else None

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
        if not self.simulated:
            return self._hardware_parts()
        mean = statistics.fmean(self.wall_s)
        std = statistics.pstdev(self.wall_s) if len(self.wall_s) > 1 else 0.0
        dev = statistics.fmean(self.device_s)
        title = f"%trn timeit{'' if self.synced else ' (enqueue only)'}: {self.statement}"
        host_note = "host waits for the device at the end" if self.synced else "host does not wait: device still busy"
        return [
            Card(
                title,
                [
                    (
                        "modeled host time per loop",
                        f"{fmt_s(self.host_s or 0.0)} ({host_note}) · modeled device {fmt_s(dev)}",
                    ),
                    (
                        "first call (incl. any compile)",
                        f"modeled host {fmt_s(self.first_host_s)} · wall {fmt_s(self.first_wall_s)}",
                    ),
                    ("warm-up", f"{self.warmup} call{'s' if self.warmup != 1 else ''} (not timed)"),
                    (
                        "wall time per loop",
                        f"{fmt_s(mean)} ± {fmt_s(std)} (best {fmt_s(self.best_s)}): the laptop computing every op; "
                        "it cannot show asynchrony, read the modeled host time",
                    ),
                    ("runs", f"{self.repeats} runs × {self.loops} loops"),
                    ("boundary", self.boundary),
                ],
            )
        ]

    def _hardware_parts(self) -> list[Result]:
        mean = statistics.fmean(self.wall_s)
        std = statistics.pstdev(self.wall_s) if len(self.wall_s) > 1 else 0.0
        title = f"%trn timeit{'' if self.synced else ' (enqueue only)'}: {self.statement}"
        return [
            Card(
                title,
                [
                    ("wall time per loop", f"{fmt_s(mean)} ± {fmt_s(std)} (best {fmt_s(self.best_s)}), measured"),
                    ("first call (incl. any compile)", f"wall {fmt_s(self.first_wall_s)}"),
                    ("warm-up", f"{self.warmup} call{'s' if self.warmup != 1 else ''} (not timed)"),
                    ("modeled host / device time", f"{NA} (the simulator's clocks; this is hardware)"),
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
    simulated = facts.current().is_simulator

    def run(loops: int) -> tuple[float, float, float]:
        _sync()  # every run starts from an idle device (else --no-sync runs queue behind each other)
        c0 = clocks.snapshot() if simulated else None
        t0 = time.perf_counter()
        for _ in range(loops):
            fn()
        boundary()
        wall = time.perf_counter() - t0
        if c0 is None:
            return wall, 0.0, 0.0
        c1 = clocks.snapshot()
        return wall, float(c1.sim_device_s - c0.sim_device_s), float(c1.sim_host_s - c0.sim_host_s)

    first_wall, first_dev, first_host = run(1)
    warm_wall = first_wall
    for _ in range(warmup):
        warm_wall, _, _ = run(1)
    if number is None:
        number = max(1, min(AUTO_MAX_LOOPS, int(AUTO_TARGET_S / max(warm_wall, 1e-9))))
    walls, devs, hosts = [], [], []
    for _ in range(repeat):
        w, d, h = run(number)
        walls.append(w / number)
        devs.append(d / number)
        hosts.append(h / number)
    _sync()  # leave nothing queued behind the measurement
    return TimeitResult(
        statement, number, repeat, warmup, sync, first_wall, first_dev, walls, devs, first_host, hosts, simulated
    )
