"""How simulated ranks find each other without opening anything another user can reach.

PyTorch's default ``env://`` rendezvous starts a ``TCPStore`` server on rank 0 that listens on
**every interface** and accepts any client: another user on the machine (or the network) could
list, read and write the process group's keys and redirect or break the collectives. The ranks we
start use instead:

* a ``FileStore`` in a private directory (:func:`private_dir`: ``mkdtemp``, mode ``0700``), which
  only this user's processes can open;
* gloo's pair sockets bound to the loopback interface (``GLOO_SOCKET_IFNAME``, see
  :func:`loopback_env`), never to the host name's address;
* the notebook↔rank control channel over a ``socketpair`` inherited by the rank (no listening
  socket at all, so no stranger can connect to it or stall the start).
"""

from __future__ import annotations

import os
import socket
import tempfile
from datetime import timedelta
from typing import Any

MAX_WORLD_SIZE = 16
"""The largest number of simulated ranks (each is a process on this machine)."""


def check_world_size(world_size: int, what: str = "world_size") -> int:
    """``world_size`` as an int in 1..:data:`MAX_WORLD_SIZE`; raises ``ValueError`` saying the bounds."""
    if isinstance(world_size, bool) or not isinstance(world_size, int):
        raise ValueError(f"{what} must be an integer, got {world_size!r}")
    if not 1 <= world_size <= MAX_WORLD_SIZE:
        raise ValueError(
            f"{what} must be between 1 and {MAX_WORLD_SIZE} (each simulated rank is a process on this machine), "
            f"got {world_size}"
        )
    return world_size


def private_dir(prefix: str) -> str:
    """A fresh directory only this user can enter (``tempfile.mkdtemp``: mode ``0700``, unpredictable name)."""
    return tempfile.mkdtemp(prefix=prefix)


def loopback_interface() -> str:
    """The name of the loopback network interface (``lo`` on Linux, ``lo0`` on macOS)."""
    try:
        names = [name for _, name in socket.if_nameindex()]
    except OSError:
        names = []
    return next((n for n in names if n == "lo" or n.startswith("lo")), "lo")


def loopback_env() -> dict[str, str]:
    """Environment for a rank: gloo binds its sockets to loopback, not to the host name's address."""
    return {"GLOO_SOCKET_IFNAME": loopback_interface()}


def store_path(directory: str) -> str:
    """The rendezvous file of a group whose private directory is ``directory``."""
    return os.path.join(directory, "store")


def join_group(store_file: str, rank: int, world_size: int, timeout_s: float) -> None:
    """``init_process_group("neuron")`` through a ``FileStore`` at ``store_file`` (no TCP store is started).

    Raises what ``init_process_group`` raises (a timeout when a peer never joins).
    """
    import torch.distributed as dist

    store: Any = dist.FileStore(store_file, world_size)
    dist.init_process_group(
        "neuron", store=store, rank=rank, world_size=world_size, timeout=timedelta(seconds=timeout_s)
    )
