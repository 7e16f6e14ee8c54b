"""Entry point of one ``%%trn ranks`` worker: ``python -m trn_notebook.distributed._rank_worker``.

Kept apart from :mod:`.pool` so that running it as ``__main__`` does not re-import that module.
"""

from __future__ import annotations

import sys
from multiprocessing.connection import Connection

from .pool import _worker_main


def main(argv: list[str]) -> None:
    """Serve cells as rank ``argv[0]`` over the socketpair end the notebook (process ``argv[5]``) passed as file
    descriptor ``argv[3]``; exits at once if that notebook has already died."""
    rank, world, store_file, fd, collective_timeout_s, parent_pid = argv
    _worker_main(int(rank), int(world), store_file, Connection(int(fd)), float(collective_timeout_s), int(parent_pid))


if __name__ == "__main__":
    main(sys.argv[1:])
