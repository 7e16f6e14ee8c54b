"""A private network namespace for the simulated ranks, made and entered without privilege (Linux).

Run by path, before anything imports torch (standard library only, so that it is cheap and the process is
still single-threaded, which ``setns`` into a user namespace requires):

* ``python _netns_boot.py hold FD``: ``unshare(CLONE_NEWUSER | CLONE_NEWNET)``, map this uid/gid to
  themselves, bring ``lo`` up, then send the two namespace file descriptors over the socket ``FD``
  (``SCM_RIGHTS``) and exit; on failure send ``error: <what failed>``. The descriptors keep the namespaces
  alive, so nothing has to stay running.
* ``python _netns_boot.py enter USER_FD NET_FD MODULE ARG...``: join both namespaces, then run ``MODULE``
  as ``python -m MODULE ARG...`` would.

Only ``lo`` exists in that network namespace: no process outside it can reach a socket bound in it.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import runpy
import socket
import struct
import sys

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1


def _libc_call(name: str, *args: int) -> None:
    """Call ``libc.name(*args)``; raises ``OSError`` with errno when it returns -1."""
    libc = ctypes.CDLL(None, use_errno=True)
    if getattr(libc, name)(*args) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{name}: {os.strerror(err)}")


def _write(path: str, text: str) -> None:
    # a /proc file of this process (uid_map, setgroups): written in place, as the kernel requires
    with open(path, "w") as fh:
        fh.write(text)


def loopback_up() -> None:
    """Set ``IFF_UP`` on ``lo`` of the current network namespace; raises ``OSError`` if refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifr = fcntl.ioctl(s.fileno(), _SIOCGIFFLAGS, struct.pack("16sh", b"lo", 0))
        flags = struct.unpack("16sh", ifr[:18])[1]
        fcntl.ioctl(s.fileno(), _SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | _IFF_UP))


def make_private_net() -> tuple[int, int]:
    """Move this process into a new user and network namespace with ``lo`` up; ``(user_fd, net_fd)``.

    Raises ``OSError`` saying which step the system refused (``unshare``: unprivileged user namespaces off,
    a container's seccomp profile; ``uid_map``: an AppArmor restriction; ``ioctl``: no ``lo``).
    """
    uid, gid = os.getuid(), os.getgid()
    _libc_call("unshare", CLONE_NEWUSER | CLONE_NEWNET)
    try:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    except OSError as exc:
        raise OSError(exc.errno, f"writing the uid/gid map of the new user namespace: {exc.strerror}") from None
    try:
        loopback_up()
    except OSError as exc:
        raise OSError(exc.errno, f"bringing lo up in the new network namespace: {exc.strerror}") from None
    return os.open("/proc/self/ns/user", os.O_RDONLY), os.open("/proc/self/ns/net", os.O_RDONLY)


def enter(user_fd: int, net_fd: int) -> None:
    """Join the user namespace, then the network namespace, behind the two descriptors; closes them.

    Raises ``OSError`` if the kernel refuses (the process must be single-threaded).
    """
    _libc_call("setns", user_fd, CLONE_NEWUSER)
    _libc_call("setns", net_fd, CLONE_NEWNET)
    os.close(user_fd)
    os.close(net_fd)


def _hold(fd: int) -> int:
    with socket.socket(fileno=fd) as chan:
        try:
            fds = make_private_net()
        except OSError as exc:
            chan.sendall(f"error: {exc.strerror or exc}".encode())
            return 0
        socket.send_fds(chan, [b"ok"], list(fds))
    return 0


def _enter_and_run(user_fd: int, net_fd: int, module: str, args: list[str]) -> None:
    try:
        enter(user_fd, net_fd)
    except OSError as exc:
        sys.stderr.write(f"cannot join the ranks' private network namespace: {exc.strerror or exc}\n")
        raise SystemExit(1) from None
    if sys.flags.safe_path:  # as `python -m` does: the working directory first, unless -P / PYTHONSAFEPATH
        del sys.path[0]
    else:
        sys.path[0] = os.getcwd()
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    if sys.argv[1] == "hold":
        raise SystemExit(_hold(int(sys.argv[2])))
    _enter_and_run(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5:])
