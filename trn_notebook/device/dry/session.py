"""A dry run of the device: shape-only ``neuron`` tensors, every op charged as on the real device.

:class:`DrySession` is the machinery behind :func:`trn_notebook.dryrun`: on entry it pushes torch's
``FakeTensorMode`` (tensors become shape-only) and :class:`~.dispatch.DryMode` above it (each
``neuron`` op routed and charged as the real device would), gives the run a fresh shape-only
allocator (:class:`~.alloc.DryAllocator`, same capacity and rules as the real one) and fresh
placement-log and clock state, so the dry figures never mix with measured ones; on exit the real
state comes back untouched and the dry figures stay in the session as frozen snapshots.

:data:`dry_runs` is the state owner (registered in :mod:`trn_notebook.state`): the last dry run's
figures, ``reset()`` forgets them.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from ... import state as _state
from ...locks import ACCOUNTING
from ..clocks import ClockSnapshot, ClockState, clocks
from ..eager.storage_resize import META_RESIZED
from ..memory.allocator import MemorySnapshot
from ..memory.runtime import allocator as _real_allocator
from ..memory.runtime import get_chip
from ..placement import PlacementSnapshot, placement_log
from .alloc import Crossing, DryAllocator, StorageTracker
from .dispatch import DryMode, Finding
from .modules import ModuleRestorer

_active = threading.local()
_process: list[DrySession] = []  # dry runs entered in this process (any thread), innermost last


def _foreach_type_lists() -> list[list[type]]:
    """torch's lists of tensor types its optimizers and clip_grad take the foreach (multi-tensor) path for.

    A shape-only tensor's type is ``FakeTensor``, not ``torch.Tensor``, so without it on these lists an
    optimizer would pick its per-tensor path in a dry run and its foreach path on the device: different
    ops. The dry run adds ``FakeTensor`` while it runs.
    """
    import torch.optim.optimizer as optim
    import torch.utils._foreach_utils as fe

    return [optim._foreach_supported_types, fe._foreach_supported_types]


@dataclass(frozen=True)
class DryFigures:
    """The figures of one dry run (all modeled: nothing ran on a device, no value was computed)."""

    label: str
    chip: str
    placement: PlacementSnapshot
    clocks: ClockSnapshot
    memory: MemorySnapshot
    findings: tuple[Finding, ...]
    ops: int
    wall_s: float
    assumptions: tuple[str, ...] = ()  # what charges assumed for want of values ("balanced routing, assumed")
    crossing: Crossing | None = None  # where the run first needed more than the capacity (None: it fit)
    logical_cores: int = 0  # logical cores per chip of the run's chip (what "how many chips" divides by)


class DrySession:
    """Enter to run shape-only; the figures accumulate in :attr:`allocator` and the swapped-in owners."""

    def __init__(
        self,
        label: str = "dry run",
        *,
        capacity: int | None = None,
        on_data_dependent: str = "continue",
        strict: bool = False,
    ) -> None:
        if on_data_dependent not in ("continue", "raise"):
            raise ValueError(f"on_data_dependent must be 'continue' or 'raise', got {on_data_dependent!r}")
        self.label = label
        self.allocator = DryAllocator(capacity if capacity is not None else _real_allocator.capacity, strict=strict)
        self.tracker = StorageTracker(self.allocator)
        self.fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
        self.mode = DryMode(self.tracker, on_data_dependent)
        self.modules = ModuleRestorer()
        self._saved: tuple[Any, ...] | None = None
        self._dry_state: tuple[Any, ...] | None = None
        self._t0 = 0.0
        self.wall_s = 0.0
        self.figures: DryFigures | None = None

    def __enter__(self) -> DrySession:
        if getattr(_active, "session", None) is not None:
            raise RuntimeError("a dry run is already active in this thread; dry runs do not nest")
        import time

        with ACCOUNTING:  # the books' one lock (reentrant: reading them folds pending eager records under it)
            self._saved = (placement_log.entries, placement_log.total_calls, clocks.state)
            placement_log.entries, placement_log.total_calls = {}, 0
            placement_log.version += 1
            clocks.state = ClockState()
        _active.session = self
        _process.append(self)
        self._t0 = time.perf_counter()
        self.modules.install()
        for types in _foreach_type_lists():
            types.append(FakeTensor)
        # transformers' own "is this tensor traced?" test reads a FakeTensor's data pointer (masking_utils), which
        # torch warns about; that probe is harmless and expected here, so the dry run does not pass it on
        self._warnings = warnings.catch_warnings()
        self._warnings.__enter__()
        warnings.filterwarnings("ignore", message="Accessing the data pointer of FakeTensor", category=UserWarning)
        self.fake_mode.__enter__()
        self.mode.__enter__()
        return self

    def __exit__(self, tp: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        import time

        try:
            self.mode.__exit__(tp, exc, tb)
        finally:
            self.fake_mode.__exit__(tp, exc, tb)
            self._warnings.__exit__(None, None, None)
            self.modules.restore()  # models built outside and moved in get their real tensors back
            for types in _foreach_type_lists():
                types.remove(FakeTensor)
            self.wall_s = time.perf_counter() - self._t0
            self.figures = self.snapshot()
            assert self._saved is not None
            with ACCOUNTING:
                placement_log.entries, placement_log.total_calls, clocks.state = self._saved
                placement_log.version += 1
            _active.session = None
            _process.remove(self)
            dry_runs.last = self.figures

    def snapshot(self) -> DryFigures:
        """The dry figures so far (inside the run: live; after it: those at exit)."""
        if self.figures is not None:
            return self.figures
        chip = get_chip()
        return DryFigures(
            self.label,
            chip.name,
            placement_log.snapshot(),
            clocks.snapshot(),
            self.allocator.snapshot(),
            tuple(self.mode.findings),
            self.mode.ops,
            self.wall_s,
            tuple(f"{a} (×{n})" for a, n in self.mode.assumptions.items()),
            self.allocator.crossing,
            chip.logical_cores,
        )

    def phase(self, name: str) -> Any:
        """Attribute the dry allocator's peaks inside the block to phase ``name``."""
        return self.allocator.phase_scope(name)


def active() -> DrySession | None:
    """The dry run active in this thread, or ``None``."""
    return getattr(_active, "session", None)


def storage_owner() -> DrySession | None:
    """The dry run whose shape-only storages are being resized, from any thread (autograd's device
    threads run backward hooks such as FSDP2's ``storage.resize_(0)`` outside the thread that entered it).
    """
    session = active()
    if session is None and _process:
        session = _process[-1]
    return session


def _retrack_resized(storage: torch.UntypedStorage) -> None:
    """A shape-only storage was resized: the dry run that owns it moves its block to the new size."""
    session = storage_owner()
    if session is not None:
        session.tracker.retrack_storage(storage)


META_RESIZED.append(_retrack_resized)


def is_dry(t: torch.Tensor) -> bool:
    """True for a shape-only tensor made by a dry run (it has no values to read)."""
    from torch._subclasses.fake_tensor import is_fake

    return bool(is_fake(t))


class _DryRuns:
    """State owner: the figures of the last dry run in this process."""

    def __init__(self) -> None:
        self.last: DryFigures | None = None

    def snapshot(self) -> DryFigures | None:
        """The last dry run's figures (``None`` before any)."""
        return self.last

    def reset(self) -> None:
        """Forget the last dry run's figures."""
        self.last = None


dry_runs = _state.register("dry_runs", _DryRuns())
# the dry runs in progress: entered and left by DrySession itself, a reset must not drop a running one
_state.register("dry_sessions", _state.Globals(__name__, "_process"), reset=False)
