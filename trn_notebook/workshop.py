"""The workshop notebooks, wherever trn-notebook is installed, and ``trn-notebook-workshop DIR``.

In a wheel the notebooks ship as package data (``trn_notebook/examples/``, copied from the repository's
``examples/`` at build time); in a source checkout they are read from ``examples/`` itself.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


class WorkshopNotFoundError(FileNotFoundError):
    """Neither the packaged notebooks nor a source checkout's ``examples/`` were found."""


def workshop_dir() -> Path:
    """The folder holding the workshop notebooks; raises :class:`WorkshopNotFoundError` if there is none."""
    for candidate in (PACKAGE_DIR / "examples", PACKAGE_DIR.parent / "examples"):
        if any(candidate.glob("*.ipynb")):
            return candidate
    raise WorkshopNotFoundError(
        f"no workshop notebooks in {PACKAGE_DIR / 'examples'} (installed wheel) or {PACKAGE_DIR.parent / 'examples'} "
        "(source checkout): reinstall trn-notebook from a wheel or run from a checkout"
    )


WORKSHOP_DOCS = ("SECURITY.md", "nki-subset.md", "fidelity.md", "numerics.md")
"""The repository documents the notebooks name (``docs/...``): they ship in the wheel beside the notebooks
(``trn_notebook/examples/docs/``) and every copied workshop gets them in ``docs/``."""


def workshop_docs() -> list[Path]:
    """The documents the notebooks refer to, from the wheel's ``examples/docs`` or a checkout's ``docs/``.

    Raises :class:`WorkshopNotFoundError` when one is missing from both places.
    """
    found = []
    for name in WORKSHOP_DOCS:
        for candidate in (workshop_dir() / "docs" / name, PACKAGE_DIR.parent / "docs" / name):
            if candidate.is_file():
                found.append(candidate)
                break
        else:
            raise WorkshopNotFoundError(f"the workshop document docs/{name} is missing: reinstall trn-notebook")
    return found


def notebooks() -> list[Path]:
    """The workshop notebooks in order (``01_quickstart.ipynb`` …); raises :class:`WorkshopNotFoundError`."""
    return sorted(workshop_dir().glob("*.ipynb"))


def copy_workshop(dest: str | Path, *, overwrite: bool = False) -> list[Path]:
    """Copy every workshop file into ``dest`` (created if missing); returns the copied paths.

    Raises ``FileExistsError`` naming the files that exist already unless ``overwrite``, and
    :class:`WorkshopNotFoundError` if the notebooks are missing.
    """
    source = workshop_dir()
    dest = Path(dest).expanduser()
    files = sorted(p for p in source.rglob("*") if p.is_file() and ".ipynb_checkpoints" not in p.parts)
    targets = [dest / p.relative_to(source) for p in files]
    for doc in workshop_docs():  # the notebooks say "see docs/SECURITY.md": it is there in the copy
        if dest / "docs" / doc.name not in targets:
            files.append(doc)
            targets.append(dest / "docs" / doc.name)
    clashes = [t for t in targets if t.exists()]
    if clashes and not overwrite:
        names = ", ".join(t.name for t in clashes[:4]) + (" …" if len(clashes) > 4 else "")
        raise FileExistsError(f"{dest} already has {names}: pick an empty folder or pass --overwrite")
    for src, target in zip(files, targets):
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
    return targets


def main(argv: list[str] | None = None) -> int:
    """``trn-notebook-workshop DIR [--overwrite] [--open [-- JUPYTER-LAB-ARGS]]``: copy the workshop to DIR.

    With ``--open`` it then runs JupyterLab in DIR (``python -m jupyterlab DIR``, bound to 127.0.0.1, token
    authentication as JupyterLab's default), passing on what follows ``--`` (e.g. ``--no-browser``,
    ``--port 8899``). Returns the exit status: 0 copied (or JupyterLab's own status), 2 for a folder that
    holds notebooks already, missing workshop files, or ``--open`` without JupyterLab installed.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    lab_args = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(
        prog="trn-notebook-workshop",
        description="Copy the trn-notebook workshop notebooks into a folder.",
        epilog="Arguments after -- go to jupyter lab with --open, e.g. -- --no-browser --port 8899.",
    )
    parser.add_argument("dest", help="folder to copy the notebooks into (created if missing)")
    parser.add_argument("--overwrite", action="store_true", help="replace notebooks that exist already")
    parser.add_argument("--open", action="store_true", help="start JupyterLab in the folder afterwards")
    args = parser.parse_args(argv)
    if lab_args and not args.open:
        parser.error("arguments after -- are for jupyter lab: add --open")
    if args.open and importlib.util.find_spec("jupyterlab") is None:  # before copying: nothing half done
        print(
            "trn-notebook-workshop: --open needs JupyterLab, which is not installed: install the workshop's "
            'extras, pip install "trn-notebook[lab,models]" (or copy without --open and open the folder '
            "in the Jupyter you have)",
            file=sys.stderr,
        )
        return 2
    try:
        copied = copy_workshop(args.dest, overwrite=args.overwrite)
    except (FileExistsError, WorkshopNotFoundError) as exc:
        print(f"trn-notebook-workshop: {exc}", file=sys.stderr)
        return 2
    dest = Path(args.dest).expanduser()
    print(f"copied {len(copied)} files to {dest}:")
    for path in copied:
        print(f"  {path.relative_to(dest)}")
    if not args.open:
        print(f"open them with: jupyter lab {dest}")
        return 0
    sys.stdout.flush()
    return subprocess.call([sys.executable, "-m", "jupyterlab", "--ServerApp.ip=127.0.0.1", *lab_args, str(dest)])


if __name__ == "__main__":
    raise SystemExit(main())
