"""Run Python in a subprocess with trn-notebook's current entry points and, optionally, the fake torch_neuronx."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FAKE = Path(__file__).resolve().parent / "fake_hardware"


def our_dist_info(tmp: Path) -> Path:
    """A dist-info declaring this checkout's entry points (the installed metadata may be an older checkout's)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    info = tmp / "ours" / f"trn_notebook-{project['version']}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
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
