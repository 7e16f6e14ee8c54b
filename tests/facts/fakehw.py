"""Run Python in a subprocess, or a workshop notebook in a kernel, with trn-notebook's current entry points
and, optionally, the fake torch_neuronx."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FAKE = Path(__file__).resolve().parent / "fake_hardware"


def our_dist_info(tmp: Path) -> Path:
    """A dist-info declaring this checkout's entry points (the installed metadata may be an older checkout's)."""
    from trn_notebook._version import __version__ as version  # pyproject's version is read from it (hatch)

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    info = tmp / "ours" / f"trn_notebook-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {version}\n")
    lines = []
    for group, entries in project["entry-points"].items():
        lines.append(f"[{group}]")
        lines += [f"{name} = {target}" for name, target in entries.items()]
        lines.append("")
    (info / "entry_points.txt").write_text("\n".join(lines))
    return info.parent


def environment(tmp: Path, *, fake: bool, fake_first: bool = True, device: bool = False) -> dict[str, str]:
    """The environment of a subprocess (or kernel) that sees this checkout and, if ``fake``, the stand-in
    torch_neuronx; ``device=True`` gives that stand-in a ``neuron`` device (FAKE_NEURONX_DEVICE=1)."""
    paths = [str(ROOT), str(our_dist_info(tmp))]
    if fake:
        paths.insert(1 if fake_first else 2, str(FAKE))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FAKE_NEURONX_DEVICE")}
    env.update(PYTHONPATH=os.pathsep.join(paths), OMP_NUM_THREADS="1", TORCH_NEURONX_NEFF_CACHE_DIR=str(tmp / "neff"))
    if device:
        env["FAKE_NEURONX_DEVICE"] = "1"
    return env


def run(code: str, tmp: Path, *, fake: bool, fake_first: bool = True, device: bool = False, timeout: int = 300) -> str:
    """Run ``code`` in a fresh interpreter; returns stdout, raises AssertionError with stderr on failure."""
    env = environment(tmp, fake=fake, fake_first=fake_first, device=device)
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r.stdout


@dataclass
class NotebookRun:
    """A workshop notebook executed under the fake TorchNeuron (:func:`run_notebook`)."""

    nb: Any  # the executed nbformat notebook, simulator-only cells removed
    skipped: list[str]  # ids of the cells tagged simulator-only that were left out
    seconds: float
    error: str | None = None  # "ExceptionName: last line of the message", None when every cell ran
    error_cell: str | None = None  # id of the cell that raised
    texts: dict[str, str] = field(default_factory=dict)  # code cell id -> its stdout and text/plain results

    @property
    def ok(self) -> bool:
        """True when every cell ran without an error."""
        return self.error is None


def cell_text(cell: Any) -> str:
    """A code cell's stream outputs and text/plain results, joined."""
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out["text"])
        elif "data" in out:
            parts.append(str(out["data"].get("text/plain", "")))
    return "".join(parts)


def _last_line(text: str) -> str:
    lines = [line for line in re.sub(r"\x1b\[[0-9;]*m", "", text).splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def run_notebook(name: str, tmp: Path, *, timeout: int = 300) -> NotebookRun:
    """Run ``examples/<name>`` in a fresh kernel under the stand-in torch_neuronx with its ``neuron`` device.

    The notebook is copied to ``tmp`` (its working directory) and its cells tagged simulator-only (port-check's
    mark) are left out, as a notebook moved to a Trn2 would skip them. The stand-in borrows the simulator's
    kernels for its device at ``import torch``, which cannot happen while trn_notebook itself is being imported
    (a real torch_neuronx has its own runtime): the kernel imports torch first, in an IPython startup file.
    Stops at the first failing cell, which is reported in the result rather than raised.
    """
    import nbclient
    import nbformat
    from nbclient.exceptions import CellExecutionError

    from trn_notebook.migration.portcheck import MARK_TAG

    env = environment(tmp, fake=True, device=True)
    startup = tmp / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    (startup / "00-import-torch.py").write_text("import torch  # noqa: F401\n")
    env["IPYTHONDIR"] = str(tmp / "ipython")
    path = tmp / name
    shutil.copy(ROOT / "examples" / name, path)
    nb = nbformat.read(path, as_version=4)
    skipped = [c.id for c in nb.cells if MARK_TAG in c.metadata.get("tags", [])]
    nb.cells = [c for c in nb.cells if MARK_TAG not in c.metadata.get("tags", [])]
    client = nbclient.NotebookClient(
        nb, kernel_name="python3", timeout=timeout, resources={"metadata": {"path": str(tmp)}}
    )
    error = error_cell = None
    start = time.perf_counter()
    try:
        client.execute(env=env)  # the kernel's environment (jupyter_client's start_kernel(env=...))
    except CellExecutionError as exc:
        error = f"{exc.ename}: {_last_line(str(exc.evalue)) or _last_line(str(exc))}"
    except Exception as exc:  # a dead kernel or a timeout is a failed run, reported as such
        error = f"{type(exc).__name__}: {_last_line(str(exc))}"
    if error is not None:
        code = [c for c in nb.cells if c.cell_type == "code"]
        raised = [c for c in code if any(o.get("output_type") == "error" for o in c.get("outputs", []))]
        unfinished = [c for c in code if c.get("execution_count") is None]  # a timeout or a dead kernel
        first = next(iter(raised or unfinished), None)
        error_cell = first.id if first is not None else None
    seconds = time.perf_counter() - start
    texts = {c.id: cell_text(c) for c in nb.cells if c.cell_type == "code"}
    return NotebookRun(nb, skipped, seconds, error, error_cell, texts)
