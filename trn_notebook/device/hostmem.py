"""How much host memory the simulator may still take: the bytes of simulated HBM are real host memory.

The limit is the smaller of the machine's ``MemAvailable`` (``/proc/meminfo``) and the headroom
under the process's cgroup memory limit (v2 ``memory.max``/``memory.current`` or v1
``memory.limit_in_bytes``/``memory.usage_in_bytes``) — a container kills the kernel at its cgroup
limit long before the machine runs out. The allocator asks :func:`headroom` before it reserves a
new segment and raises the simulated ``OutOfMemoryError`` while :data:`RESERVE` bytes are still
free, instead of letting the host's OOM killer end the kernel. Where none of these files exist
(macOS, Windows) ``psutil`` is used when installed; otherwise there is no host guard.
"""

from __future__ import annotations

import os
import time

from .. import state as _state

MiB = 1 << 20
RESERVE = 512 * MiB  # left to Python, the notebook and the OS when the simulated device is refused
PROBE_EVERY_S = 0.05
_CGROUPS = (
    ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
    ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
)
_NO_LIMIT = 1 << 60


def _read(path: str) -> bytes:
    """The bytes of a small /proc or /sys file (``os.read``: a third of ``Path.read_text``'s cost on sysfs)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 1 << 16)
    finally:
        os.close(fd)


def _read_int(path: str) -> int | None:
    try:
        text = _read(path).strip()
    except OSError:
        return None
    return _NO_LIMIT if text == b"max" else int(text) if text.isdigit() else None


def available_bytes() -> int | None:
    """Bytes the host can still give this process (None when unknown)."""
    found: list[int] = []
    try:
        for line in _read("/proc/meminfo").splitlines():
            if line.startswith(b"MemAvailable:"):
                found.append(int(line.split()[1]) * 1024)
                break
    except (OSError, ValueError, IndexError):
        pass
    for limit_path, usage_path in _CGROUPS:
        limit, usage = _read_int(limit_path), _read_int(usage_path)
        if limit is not None and usage is not None and limit < _NO_LIMIT:
            found.append(max(0, limit - usage))
            break
    if not found:
        try:
            import psutil  # type: ignore[import-untyped]

            found.append(int(psutil.virtual_memory().available))
        except Exception:
            return None
    return min(found)


class HostGuard:
    """Host headroom, probed at most every :data:`PROBE_EVERY_S` and debited by the device bytes taken since."""

    def __init__(self) -> None:
        self.probe = available_bytes
        self._at = -1.0
        self._avail: int | None = None
        self._used_then = 0

    def headroom(self, used_now: int) -> int | None:
        """Bytes the device may still take (``used_now``: its live bytes) before only :data:`RESERVE` is left (None: no guard)."""
        now = time.monotonic()
        estimate = None if self._avail is None else self._avail - (used_now - self._used_then)
        if estimate is None or now - self._at > PROBE_EVERY_S or estimate < 4 * RESERVE:
            self._avail, self._at, self._used_then = self.probe(), now, used_now
            estimate = self._avail
        return None if estimate is None else estimate - RESERVE


guard = HostGuard()
_state.register("host_guard", _state.Globals(__name__, "guard"), reset=False)  # a probe cache
