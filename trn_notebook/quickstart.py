"""Run the quickstart notebook headless on the simulator and print its summary.

``python -m trn_notebook.quickstart [NOTEBOOK]`` executes the workshop's ``01_quickstart.ipynb`` (shipped in
the wheel, or ``examples/`` in a checkout) with a real Jupyter kernel (nbclient + ipykernel, from the ``lab``
extra) and prints the text output of the cells tagged ``summary``. The packaged notebook runs in a scratch
copy (notebooks may write files beside themselves). Exit status 1 if a cell fails, 2 if it cannot start.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from .workshop import PACKAGE_DIR, WorkshopNotFoundError, workshop_dir

QUICKSTART = "01_quickstart.ipynb"


def run_notebook(path: str | os.PathLike[str], timeout: int = 600) -> tuple[object, float]:
    """Execute the notebook at ``path`` (a ``str`` or a path) in its own folder; returns (notebook, seconds).

    Raises ``nbclient.exceptions.CellExecutionError`` if a cell fails, ``FileNotFoundError`` if missing.
    """
    import nbformat
    from nbclient import NotebookClient

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        # A local kernel on 127.0.0.1: ipykernel's "running over TCP without encryption" warning would
        # otherwise be the first line this command prints.
        extra_arguments=["--IPKernelApp.log_level=ERROR"],
    )
    t0 = time.perf_counter()
    client.execute()
    return nb, time.perf_counter() - t0


def summary_text(nb: object) -> str:
    """The stdout text of the cells tagged ``summary``, one block per cell.

    A cell's stdout may arrive in several stream chunks (split anywhere under load); they are joined as they
    came, so a chunk boundary never adds or removes a line break.
    """
    blocks = []
    for cell in nb.cells:  # type: ignore[attr-defined]
        if cell.cell_type == "code" and "summary" in cell.metadata.get("tags", []):
            chunks = [
                out["text"]
                for out in cell.get("outputs", [])
                if out.get("output_type") == "stream" and out.get("name") == "stdout"
            ]
            text = "".join(chunks).rstrip()
            if text:
                blocks.append(text)
    return "\n".join(blocks)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m trn_notebook.quickstart",
        description="Execute the quickstart notebook (or NOTEBOOK) headless in a real Jupyter kernel on the "
        "simulator and print its summary. Needs the lab extra (nbclient, ipykernel). Exit status: 0 ok, "
        "1 a cell failed, 2 it could not start.",
    )
    parser.add_argument("notebook", nargs="?", help=f"a notebook to run instead of the workshop's {QUICKSTART}")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell (default 600)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the quickstart (or the notebook given) and print its summary; returns the exit status."""
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        path = Path(args.notebook) if args.notebook else workshop_dir() / QUICKSTART
    except WorkshopNotFoundError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    if not path.exists():
        print(f"notebook not found: {path}", file=sys.stderr)
        return 2
    try:
        from nbclient.exceptions import CellExecutionError
    except ImportError:
        print('nbclient is missing: install the lab extra, pip install "trn-notebook[lab]"', file=sys.stderr)
        return 2
    packaged = path.resolve().is_relative_to(PACKAGE_DIR)
    with tempfile.TemporaryDirectory(prefix="trn-notebook-quickstart-") as scratch:
        if packaged:  # never write beside the installed package
            path = Path(shutil.copy(path, Path(scratch) / path.name))
        try:
            nb, seconds = run_notebook(path, timeout=args.timeout)
        except CellExecutionError as exc:
            print(f"{path.name} failed:\n{exc}", file=sys.stderr)
            return 1
    from .facts import current

    print(f"== {path.name}: executed headless on the {current().name} in {seconds:.1f} s ==")
    print(summary_text(nb))
    if packaged:
        print("Copy the whole workshop and open it: trn-notebook-workshop ~/trn-workshop --open")
    else:
        print(f"Open the workshop in JupyterLab: jupyter lab {path.parent}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
