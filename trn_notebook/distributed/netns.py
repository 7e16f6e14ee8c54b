"""The ranks' private network namespace: who can reach gloo's pair sockets (nobody outside the ranks).

Gloo authenticates nothing: another local user who connects to a rank's loopback listener and sends bytes
shaped like a pair's sequence number can fail a collective. So every rank of a pool runs inside one network
namespace of its own (made with a user namespace, so no privilege is needed: see :mod:`._netns_boot`), where
only ``lo`` exists and no process of the host can connect. ``TRN_NOTEBOOK_RANKS_NETNS`` chooses:

* ``auto`` (default): use it where the system allows unprivileged user namespaces, otherwise run the ranks
  as before (loopback only, see :mod:`.rendezvous`) and warn once per process naming the residual risk;
* ``on``: a refusal is an error (:class:`RanksIsolationError`);
* ``off``: never (and no warning).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import warnings
from dataclasses import dataclass, field

from .. import envvars
from .. import state as _state

ENV = "TRN_NOTEBOOK_RANKS_NETNS"
MODES = ("auto", "on", "off")
_BOOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_netns_boot.py")


class RanksIsolationWarning(UserWarning):
    """The ranks run without a private network namespace (the system refused one)."""


class RanksIsolationError(RuntimeError):
    """``TRN_NOTEBOOK_RANKS_NETNS=on`` and the system refused a private network namespace."""


def netns_mode() -> str:
    """``TRN_NOTEBOOK_RANKS_NETNS`` as one of ``auto``, ``on``, ``off``; raises ``ValueError`` naming the
    variable and the accepted values for anything else."""
    return envvars.choice(ENV, choices=MODES)


@dataclass
class PrivateNet:
    """Descriptors of a user and a network namespace that the ranks join (``rank_command``)."""

    user_fd: int
    net_fd: int
    fds: tuple[int, ...] = field(init=False)

    def __post_init__(self) -> None:
        self.fds = (self.user_fd, self.net_fd)

    def command(self, module: str, args: list[str]) -> list[str]:
        """``python -m module args`` that first joins the namespaces (pass :attr:`fds` to the child)."""
        return [sys.executable, _BOOT, "enter", str(self.user_fd), str(self.net_fd), module, *args]

    def close(self) -> None:
        """Close our descriptors (the namespaces live on while a rank is in them); idempotent."""
        fds, self.fds = self.fds, ()
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass


_warned: list[str] = []
_state.register("ranks_netns_warned", _state.Globals(__name__, "_warned"), reset=False)  # one warning per process


def _make(timeout_s: float) -> PrivateNet | str:
    """A fresh private namespace pair, or the reason the system refused it."""
    if not sys.platform.startswith("linux"):
        return f"network namespaces are Linux-only (this is {sys.platform})"
    ours, theirs = socket.socketpair()
    with ours, theirs:
        try:
            proc = subprocess.Popen(
                [sys.executable, _BOOT, "hold", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
            )
        except OSError as exc:
            return f"could not start the namespace helper: {exc}"
        theirs.close()
        ours.settimeout(timeout_s)
        try:
            msg, fds, _, _ = socket.recv_fds(ours, 256, 2)
        except OSError as exc:  # socket.timeout included
            msg, fds = f"error: no answer from the namespace helper ({exc})".encode(), []
        finally:
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    for fd in fds:  # SCM_RIGHTS gives them without close-on-exec: only the ranks (pass_fds) may inherit them
        os.set_inheritable(fd, False)
    if msg == b"ok" and len(fds) == 2:
        return PrivateNet(fds[0], fds[1])
    for fd in fds:
        os.close(fd)
    return msg.decode(errors="replace").removeprefix("error: ") or f"the namespace helper exited ({proc.returncode})"


def private_net(timeout_s: float = 30.0) -> PrivateNet | None:
    """The namespaces a new pool's ranks join, or ``None`` to run them in the host's (mode ``off``, or ``auto``
    where refused: then one :class:`RanksIsolationWarning` per process).

    Raises ``ValueError`` for a bad ``TRN_NOTEBOOK_RANKS_NETNS``, :class:`RanksIsolationError` when it is ``on``
    and the system refuses.
    """
    mode = netns_mode()
    if mode == "off":
        return None
    made = _make(timeout_s)
    if isinstance(made, PrivateNet):
        return made
    if mode == "on":
        raise RanksIsolationError(
            f"{ENV}=on but this system refuses a private network namespace for the ranks ({made}); allow "
            f"unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces>0, "
            f"or the container's seccomp/AppArmor profile), or set {ENV}=auto to run them without it"
        )
    if not _warned:
        _warned.append(made)
        warnings.warn(
            f"the simulated ranks run without a private network namespace ({made}): their gloo sockets listen on "
            f"loopback, where another local user can connect and fail a collective (gloo authenticates nothing). "
            f"Set {ENV}=off to silence this, or {ENV}=on to make it an error",
            RanksIsolationWarning,
            stacklevel=3,
        )
    return None
