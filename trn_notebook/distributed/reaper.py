"""What a rank starts does not outlive the pool: each rank is a child subreaper, and the pool kills its tree.

Each rank leads its own process group (``start_new_session``) and the pool kills that group on close, which
takes a plain ``subprocess.Popen`` or ``os.fork()`` child with it; a child in a session of its own
(``start_new_session=True``, a daemon's double fork and ``setsid``) left that group and survived. So each rank
also asks to be its descendants' subreaper (``PR_SET_CHILD_SUBREAPER``: an orphan among them is reparented to
the rank rather than to init, so it stays in the rank's tree), and the pool kills every descendant of every
rank, whatever its session, before it stops the ranks (Linux; elsewhere only the process group goes).
"""

from __future__ import annotations

import os
import signal
import time

_PR_SET_PDEATHSIG, _PR_SET_CHILD_SUBREAPER = 1, 36


def _prctl(option: int, arg: int) -> None:
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(option, arg)
    except (OSError, AttributeError):
        pass  # not Linux: the process-group kill remains


def die_with_parent(parent_pid: int) -> None:
    """Have the OS kill this rank when the notebook dies (``PR_SET_PDEATHSIG``), make it its descendants'
    subreaper (``PR_SET_CHILD_SUBREAPER``), and exit now if the notebook already died.

    The death-signal request is not retroactive, and a rank makes it only after its interpreter has imported
    torch: a notebook killed in that window left an orphan that joined the group and waited out the collective
    timeout (69 s measured) for a rank that was never started. Hence the parent check after the request.
    """
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    if os.getppid() != parent_pid:  # the notebook died before the request: nobody to serve
        os._exit(0)


def descendants(roots: list[int]) -> list[int]:
    """Every live (not zombie) descendant of the processes ``roots`` (not the roots), by
    ``psutil.Process.children(recursive=True)``; a root that has exited has none."""
    import psutil  # type: ignore[import-untyped]

    out: list[int] = []
    for root in roots:
        try:
            kids = psutil.Process(root).children(recursive=True)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        for kid in kids:
            try:
                if kid.status() != psutil.STATUS_ZOMBIE and kid.pid not in out:
                    out.append(kid.pid)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue  # exited meanwhile
    return out


def kill_descendants(roots: list[int], rounds: int = 20) -> int:
    """SIGKILL every descendant of ``roots`` until none is left (a child may fork while we look); how many."""
    killed: set[int] = set()
    for _ in range(rounds if roots else 0):
        found = descendants(roots)
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.01)  # a killed process is a zombie (skipped) once the kernel is done with it
    return len(killed)


def kill_group(pgid: int) -> None:
    """SIGKILL every process left in a rank's process group (each rank leads its own session)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
