"""The simulation context of one kernel run: buffers, capacity checks, program ids and the schedule.

One :class:`SimContext` is active while a kernel body runs (``nki.jit`` / ``nki.simulate``). It
allocates tiles (NaN-filled, so reading uninitialised memory shows), keeps the live bytes of every
SBUF partition and the PSUM banks in use against the chip's capacity (``device/chips.py``), and
feeds each instruction to the engine :class:`~.costmodel.Scheduler`. A tile stays live while the
kernel holds a reference to it (as the NKI compiler's allocator keeps it while it is used).
In ``meta`` mode tensors carry shapes only (torch's meta device): the cost of a kernel at sizes too
large to compute can be modeled with every rule still enforced.
"""

from __future__ import annotations

import math
import threading
import weakref
from dataclasses import dataclass

import torch

from .. import state as _state
from .costmodel import CoreSpec, Scheduler
from .errors import NkiCapacityError, describe, fail, kernel_line
from .tensor import ON_CHIP, SUPPORTED_DTYPES, MemoryRegion, NkiTensor, Storage, psum, sbuf, sentinel

PMAX = 128


@dataclass(frozen=True)
class TileSize:
    """``nl.tile_size``: hardware tile limits of the NeuronCore being simulated."""

    pmax: int = PMAX
    psum_fmax: int = 512
    psum_bank_fmax: int = 512
    psum_bank_fmax_bytes: int = 2048
    psum_num_banks: int = 8
    gemm_stationary_fmax: int = 128
    gemm_moving_fmax: int = 512
    bn_stats_fmax: int = 512
    sbuf_fmax_bytes: int = 224 * 1024

    @property
    def sbuf_fmax(self) -> int:
        return self.sbuf_fmax_bytes // 4


_local = threading.local()
_state.register("nki_simulator", _state.Globals(__name__, "_local"), reset=False)  # per-thread kernel context


def current() -> SimContext:
    """The active context; raises :class:`NkiError` outside a kernel run."""
    ctx = getattr(_local, "ctx", None)
    if ctx is None:
        raise fail(
            "nki.language / nki.isa calls run only inside a kernel: decorate the function with "
            "@trn_notebook.nki.jit and call it with tensors (or use nki.simulate(kernel)(...))"
        )
    return ctx


def _line() -> str:
    loc = kernel_line()
    return "" if loc is None else describe(loc[0], loc[1])


class SimContext:
    """State of one running kernel program (see the module docstring)."""

    def __init__(
        self,
        spec: CoreSpec,
        *,
        meta: bool = False,
        program_id: tuple[int, ...] = (),
        grid: tuple[int, ...] = (),
        shared: list[Storage] | None = None,
    ) -> None:
        self.spec = spec
        self.shared = [] if shared is None else shared  # HBM allocations shared by the programs of a grid
        self.hbm_index = 0
        self.meta = meta
        self.device = torch.device("meta") if meta else torch.device("cpu")
        self.program = program_id
        self.grid = grid
        self.scheduler = Scheduler(spec)
        self.scheduler.touch = self.touch
        self.tile_size = TileSize(
            psum_fmax=spec.psum_partition_bytes // spec.psum_banks // 4,
            psum_bank_fmax=spec.psum_partition_bytes // spec.psum_banks // 4,
            psum_bank_fmax_bytes=spec.psum_partition_bytes // spec.psum_banks,
            psum_num_banks=spec.psum_banks,
            gemm_moving_fmax=spec.moving_fmax,
            sbuf_fmax_bytes=spec.sbuf_partition_bytes,
        )
        self.bank_bytes = spec.psum_partition_bytes // spec.psum_banks
        self.sbuf_used = 0
        self.psum_banks_used = 0
        self.sbuf_peak = 0
        self.psum_peak = 0
        self.live: dict[int, tuple[MemoryRegion, int, str, tuple[int, ...]]] = {}
        self.closed = False

    # -- lifetime ------------------------------------------------------------------------------
    def __enter__(self) -> SimContext:
        self._outer = getattr(_local, "ctx", None)
        _local.ctx = self
        return self

    def __exit__(self, *exc: object) -> None:
        _local.ctx = self._outer
        self.closed = True

    # -- allocation ----------------------------------------------------------------------------
    def allocate(self, shape: tuple[int, ...], dtype: torch.dtype, buffer: MemoryRegion, name: str = "") -> NkiTensor:
        """A new NaN-filled tensor; raises :class:`NkiError` for bad shapes and :class:`NkiCapacityError` when full."""
        shape = tuple(int(s) for s in (shape if isinstance(shape, tuple | list) else (shape,)))
        if dtype not in SUPPORTED_DTYPES:
            raise fail(
                f"dtype {dtype} is not an NKI dtype; use one of nl.float32, nl.bfloat16, nl.float16, nl.int32, ..."
            )
        if not isinstance(buffer, MemoryRegion):
            raise fail(f"buffer must be nl.sbuf, nl.psum, nl.hbm or nl.shared_hbm, got {buffer!r}")
        if not shape or any(s <= 0 for s in shape):
            raise fail(f"tensor shapes need positive sizes, got {shape}")
        if buffer in ON_CHIP:
            if shape[0] > PMAX:
                raise fail(
                    f"partition dimension {shape[0]} exceeds {PMAX}: SBUF and PSUM have {PMAX} partitions. "
                    f"Tile dim 0 into chunks of nl.tile_size.pmax ({PMAX}) and loop over them"
                )
            self._check_fits(shape, dtype, buffer, name)  # before any memory is taken for it
        else:
            i = self.hbm_index
            self.hbm_index += 1
            if i < len(self.shared):
                st = self.shared[i]
                if tuple(st.data.shape) == shape and st.data.dtype == dtype:
                    return NkiTensor(st.data, st)
            self._check_hbm(shape, dtype, name)  # before any memory is taken for it
        data = torch.empty(shape, dtype=dtype, device=self.device)
        if not self.meta:
            data.fill_(sentinel(dtype))
        st = Storage(data, buffer, name)
        if buffer in ON_CHIP:
            if buffer is psum:
                st.written = torch.zeros(shape, dtype=torch.bool, device=self.device)
            st.pending = _line()  # reserved at first use, when the tile's previous binding has been freed
            weakref.finalize(st, self._release, st.id)
        else:
            self.shared.append(st)
        return NkiTensor(data, st)

    def _check_fits(self, shape: tuple[int, ...], dtype: torch.dtype, buffer: MemoryRegion, name: str) -> None:
        """A tile larger than a whole partition of its buffer can never be placed: refuse it at allocation.

        Live tiles are counted at first use (:meth:`touch`); this check needs no live set.
        """
        per_partition = math.prod(shape[1:]) * dtype.itemsize
        cap = self.spec.sbuf_partition_bytes if buffer is sbuf else self.spec.psum_partition_bytes
        if per_partition <= cap:
            return
        what = "SBUF" if buffer is sbuf else "PSUM"
        layout = (
            f"{PMAX} partitions x {cap / 1024:.0f} KiB = {PMAX * cap / 2**20:.0f} MiB"
            if buffer is sbuf
            else f"{PMAX} partitions x {self.spec.psum_banks} banks x {self.bank_bytes} B = {PMAX * cap / 2**20:.0f} MiB"
        )
        fmax = cap // dtype.itemsize
        raise fail(
            f"{what} capacity exceeded at allocation: tile {name or ''}{shape} {dtype} asks {per_partition:,} B "
            f"({per_partition / 1024:.1f} KiB) per partition, but one {what} partition holds {cap:,} B on "
            f"{self.spec.name} ({layout} per NeuronCore; device/chips.py, from shared/reference/trainium-figures.md). "
            f"Keep the free size of a {dtype} tile at most {fmax:,} elements: split the free dimension into tiles "
            "and loop over them",
            NkiCapacityError,
        )

    def _check_hbm(self, shape: tuple[int, ...], dtype: torch.dtype, name: str) -> None:
        """Refuse an HBM tensor the device cannot hold next to what it holds already, or (computed runs)
        the host memory backing the simulator cannot give: a kernel must end in an error, never in the
        host's OOM killer. Raises :class:`NkiCapacityError` with the figures."""
        from ..device.memory import hostmem, runtime
        from ..display.format import fmt_bytes

        nbytes = math.prod(shape) * dtype.itemsize
        taken = sum(math.prod(st.data.shape) * st.data.dtype.itemsize for st in self.shared)
        alloc = runtime.allocator
        free = alloc.capacity - alloc.counters.allocated - taken
        what = f"HBM tensor {name or ''}{shape} {dtype} asks {fmt_bytes(nbytes)}"
        if nbytes > free:
            raise fail(
                f"HBM capacity exceeded at allocation: {what}, but the device has {fmt_bytes(max(free, 0))} free of "
                f"{fmt_bytes(alloc.capacity)} ({fmt_bytes(alloc.counters.allocated)} held by tensors, "
                f"{fmt_bytes(taken)} by this kernel's earlier HBM tensors). Tile the work over smaller outputs, "
                "or free device tensors you no longer need",
                NkiCapacityError,
            )
        if self.meta:
            return  # shapes only: no host memory is taken
        room = hostmem.guard.headroom(alloc.counters.active + taken)
        if room is not None and nbytes > room:
            raise fail(
                f"host memory exceeded at allocation: {what}, but the host backing the simulator has only "
                f"{fmt_bytes(max(room, 0) + hostmem.RESERVE)} left for this process (keeping "
                f"{fmt_bytes(hostmem.RESERVE)} for the notebook). Run the kernel on smaller inputs, or model it "
                "from shapes only with nki.estimate(kernel, (shape, dtype), ...) (every rule checked, nothing computed)",
                NkiCapacityError,
            )

    def touch(self, tensors: list[NkiTensor]) -> None:
        """Reserve on-chip space for tiles used for the first time; raises :class:`NkiCapacityError` when full.

        A tile is live from its first use until the kernel drops its last reference, as the NKI
        compiler's allocator sees it (``t = nl.ndarray(...)`` in a loop reuses the space of the
        previous iteration's ``t``).
        """
        for t in tensors:
            st = t.storage
            if st.pending is None:
                continue
            line = st.pending
            shape = tuple(st.data.shape)
            if st.buffer is sbuf:
                self._reserve_sbuf(st.per_partition, shape, st.data.dtype, st.name, line)
                self.sbuf_used += st.per_partition
                self.sbuf_peak = max(self.sbuf_peak, self.sbuf_used)
                self.live[st.id] = (sbuf, st.per_partition, line, shape)
            else:
                banks = math.ceil(st.per_partition / self.bank_bytes)
                self._reserve_psum(st.per_partition, shape, st.data.dtype, st.name, line)
                st.banks = banks
                self.psum_banks_used += banks
                self.psum_peak = max(self.psum_peak, self.psum_banks_used)
                self.live[st.id] = (psum, banks, line, shape)
            st.pending = None

    def _release(self, sid: int) -> None:
        entry = self.live.pop(sid, None)
        if entry is None:
            return
        if entry[0] is sbuf:
            self.sbuf_used -= entry[1]
        else:
            self.psum_banks_used -= entry[1]

    def _largest_live(self, buffer: MemoryRegion) -> str:
        rows = sorted((e for e in self.live.values() if e[0] is buffer), key=lambda e: -e[1])[:4]
        unit = "B/partition" if buffer is sbuf else "bank(s)"
        return "; ".join(f"{e[3]} {e[1]} {unit} from {e[2] or '?'}" for e in rows) or "none"

    def _reserve_sbuf(
        self, per_partition: int, shape: tuple[int, ...], dtype: torch.dtype, name: str, line: str
    ) -> None:
        cap = self.spec.sbuf_partition_bytes
        if self.sbuf_used + per_partition > cap:
            raise fail(
                f"SBUF overflow: tile {name or ''}{shape} {dtype} (allocated at {line}) needs {per_partition / 1024:.1f} KiB per partition, "
                f"but live tiles already use {self.sbuf_used / 1024:.1f} KiB of the {cap / 1024:.0f} KiB each of the "
                f"{PMAX} SBUF partitions has on {self.spec.name}. Largest live tiles: {self._largest_live(sbuf)}. "
                "Use smaller tiles along the free dimension, or drop references to tiles you no longer need",
                NkiCapacityError,
            )

    def _reserve_psum(
        self, per_partition: int, shape: tuple[int, ...], dtype: torch.dtype, name: str, line: str
    ) -> None:
        banks = math.ceil(per_partition / self.bank_bytes)
        total = self.spec.psum_banks
        if self.psum_banks_used + banks > total:
            raise fail(
                f"PSUM overflow: tile {name or ''}{shape} {dtype} (allocated at {line}) needs {banks} bank(s) of {self.bank_bytes} B per "
                f"partition, but {self.psum_banks_used} of the {total} PSUM banks are held by live tiles "
                f"({self._largest_live(psum)}). Copy results out of PSUM (nisa.tensor_copy) and reuse fewer accumulators",
                NkiCapacityError,
            )

    # -- SPMD ----------------------------------------------------------------------------------
    def program_id(self, axis: int) -> int:
        """Index of this program along ``axis`` of the launch grid (0 without a grid)."""
        if not self.grid:
            if axis != 0:
                raise fail(f"program_id({axis}): the kernel was launched without a grid (use kernel[n](...))")
            return 0
        if not 0 <= axis < len(self.grid):
            raise fail(f"program_id({axis}) is outside the {len(self.grid)}-d launch grid {self.grid}")
        return self.program[axis]
