"""Entry point of one ``%%trn ranks`` worker: ``python -m trn_notebook.distributed._rank_worker``.

Kept apart from :mod:`.pool` so that running it as ``__main__`` does not re-import that module.
"""

from __future__ import annotations

import sys
from multiprocessing.connection import Connection

from .pool import _worker_main


def main(argv: list[str]) -> None:
    """Serve cells as rank ``argv[0]`` over the socketpair end the notebook passed as file descriptor ``argv[3]``."""
    rank, world, store_file, fd, collective_timeout_s = argv
    _worker_main(int(rank), int(world), store_file, Connection(int(fd)), float(collective_timeout_s))


if __name__ == "__main__":
    main(sys.argv[1:])
