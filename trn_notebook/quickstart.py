"""Run the quickstart notebook headless on the simulator and print its summary.

``python -m trn_notebook.quickstart [NOTEBOOK]`` executes ``examples/01_quickstart.ipynb`` with a real
Jupyter kernel (nbclient + ipykernel, from the ``lab`` extra) and prints the text output of the cells
tagged ``summary``. Exit status 1 if a cell fails.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

DEFAULT = Path(__file__).resolve().parent.parent / "examples" / "01_quickstart.ipynb"


def run_notebook(path: Path, timeout: int = 600) -> tuple[object, float]:
    """Execute the notebook at ``path`` in its own folder; returns (notebook, seconds).

    Raises ``nbclient.exceptions.CellExecutionError`` if a cell fails, ``FileNotFoundError`` if missing.
    """
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    t0 = time.perf_counter()
    client.execute()
    return nb, time.perf_counter() - t0


def summary_text(nb: object) -> str:
    """The stdout text of the cells tagged ``summary``."""
    lines = []
    for cell in nb.cells:  # type: ignore[attr-defined]
        if cell.cell_type == "code" and "summary" in cell.metadata.get("tags", []):
            for out in cell.get("outputs", []):
                if out.get("output_type") == "stream" and out.get("name") == "stdout":
                    lines.append(out["text"].rstrip())
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the quickstart (or the notebook given) and print its summary; returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    path = Path(argv[0]) if argv else DEFAULT
    if not path.exists():
        print(f"notebook not found: {path} (run from a checkout of trn-notebook)", file=sys.stderr)
        return 2
    try:
        from nbclient.exceptions import CellExecutionError
    except ImportError:
        print('nbclient is missing: install the lab extra, pip install -e ".[lab]"', file=sys.stderr)
        return 2
    try:
        nb, seconds = run_notebook(path)
    except CellExecutionError as exc:
        print(f"{path.name} failed:\n{exc}", file=sys.stderr)
        return 1
    print(f"== {path.name}: executed headless on the trn_notebook simulator in {seconds:.1f} s ==")
    print(summary_text(nb))
    print("Open the workshop in JupyterLab: jupyter lab examples/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
