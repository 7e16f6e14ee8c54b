"""Entry point of one ``%%trn ranks`` worker: ``python -m trn_notebook.distributed._rank_worker``.

Kept apart from :mod:`.pool` so that running it as ``__main__`` does not re-import that module.
"""

from __future__ import annotations

import os
import sys
from multiprocessing.connection import Client

from .pool import _worker_main


def main(argv: list[str]) -> None:
    """Connect to the notebook (authenticated) and serve cells as rank ``argv[0]``."""
    rank, world, port, address, collective_timeout_s = argv
    host, _, listen_port = address.rpartition(":")
    authkey = bytes.fromhex(os.environ.pop("TRN_RANKS_AUTHKEY"))
    conn = Client((host, int(listen_port)), authkey=authkey)
    conn.send(int(rank))
    _worker_main(int(rank), int(world), int(port), conn, float(collective_timeout_s))


if __name__ == "__main__":
    main(sys.argv[1:])
