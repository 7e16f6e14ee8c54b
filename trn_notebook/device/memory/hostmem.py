"""How much host memory the simulator may still take: the bytes of simulated HBM are real host memory.

The limit is the smaller of the machine's ``MemAvailable`` (``/proc/meminfo``) and the headroom
under the memory limits of the cgroup the process is in **and of each of its ancestors** (v2
``memory.max``/``memory.current`` or v1 ``memory.limit_in_bytes``/``memory.usage_in_bytes``): the
cgroup is found in ``/proc/self/cgroup``, so a nested cgroup (a container without a cgroup
namespace, JupyterHub/systemd, Slurm) counts, not only the root's files. A container kills the
kernel at its cgroup limit long before the machine runs out. The allocator asks :func:`headroom` before it reserves a
new segment and raises the simulated ``OutOfMemoryError`` while :data:`RESERVE` bytes are still
free, instead of letting the host's OOM killer end the kernel. Where none of these files exist
(macOS, Windows) ``psutil`` (a dependency) is used; if even that fails there is no host guard.
"""

from __future__ import annotations

import os
import time

from ... import state as _state

MiB = 1 << 20
RESERVE = 512 * MiB  # left to Python, the notebook and the OS when the simulated device is refused
PROBE_EVERY_S = 0.05
CGROUP_ROOT = "/sys/fs/cgroup"
PROC_CGROUP = "/proc/self/cgroup"
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


def cgroup_files(proc_cgroup: str = PROC_CGROUP, root: str = CGROUP_ROOT) -> list[tuple[str, str]]:
    """``(limit file, usage file)`` of this process's memory cgroup and each ancestor up to the mount root.

    Reads ``proc_cgroup`` (``/proc/self/cgroup``): the v2 line ``0::/path`` (under ``root`` or
    ``root/unified``) and the v1 ``memory`` controller's line (under ``root/memory``). Directories
    that do not exist under the mount (a cgroup namespace mounting the process's own cgroup as the
    root) are skipped; the root itself is always included. [] when the file is unreadable.
    """
    try:
        lines = _read(proc_cgroup).decode("utf-8", "replace").splitlines()
    except OSError:
        return []
    found: list[tuple[str, str]] = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        mounts: tuple[str, ...]
        if controllers == "":
            mounts, names = (root, os.path.join(root, "unified")), ("memory.max", "memory.current")
        elif "memory" in controllers.split(","):
            mounts, names = (os.path.join(root, "memory"),), ("memory.limit_in_bytes", "memory.usage_in_bytes")
        else:
            continue
        rel = [p for p in path.strip().split("/") if p and p not in (".", "..")]
        for mount in mounts:
            if not os.path.exists(os.path.join(mount, names[0])) and not os.path.isdir(os.path.join(mount, *rel)):
                continue
            for depth in range(len(rel), -1, -1):
                d = os.path.join(mount, *rel[:depth])
                if os.path.isdir(d):
                    found.append((os.path.join(d, names[0]), os.path.join(d, names[1])))
    return found


_files: tuple[int, list[tuple[str, str]]] | None = None


def cgroup_headroom() -> int | None:
    """The tightest ``limit - usage`` over this process's memory cgroup and its ancestors (None: no limit)."""
    global _files
    if _files is None or _files[0] != os.getpid():
        _files = (os.getpid(), cgroup_files())
    best: int | None = None
    for limit_path, usage_path in _files[1]:
        limit = _read_int(limit_path)
        if limit is None or limit >= _NO_LIMIT:
            continue
        usage = _read_int(usage_path)
        if usage is not None:
            room = max(0, limit - usage)
            best = room if best is None else min(best, room)
    return best


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
    cgroup = cgroup_headroom()
    if cgroup is not None:
        found.append(cgroup)
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
