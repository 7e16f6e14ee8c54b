"""The workshop ships inside the wheel and `trn-notebook-workshop DIR` copies it; the wheel works outside the repo."""

from __future__ import annotations

import os
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from trn_notebook import workshop

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
EXAMPLES = sorted(p.name for p in (ROOT / "examples").glob("*.ipynb"))


def test_copy_workshop_copies_every_notebook_and_refuses_to_overwrite(tmp_path, capsys):
    assert workshop.main([str(tmp_path / "ws")]) == 0
    assert sorted(p.name for p in (tmp_path / "ws").glob("*.ipynb")) == EXAMPLES
    assert (tmp_path / "ws" / EXAMPLES[0]).read_bytes() == (ROOT / "examples" / EXAMPLES[0]).read_bytes()
    assert "jupyter lab" in capsys.readouterr().out

    (tmp_path / "ws" / EXAMPLES[0]).write_text("my edits")
    assert workshop.main([str(tmp_path / "ws")]) == 2  # a learner's edited notebook is never clobbered silently
    assert "--overwrite" in capsys.readouterr().err
    assert (tmp_path / "ws" / EXAMPLES[0]).read_text() == "my edits"
    workshop.copy_workshop(tmp_path / "ws", overwrite=True)
    assert (tmp_path / "ws" / EXAMPLES[0]).read_text() != "my edits"


@pytest.mark.slow
def test_open_starts_jupyterlab_in_the_folder_on_127_0_0_1_with_a_token_and_passes_arguments_on(tmp_path):
    """``trn-notebook-workshop DIR --open -- --no-browser ...`` (README, issue 30 item 6): the real command starts
    the real JupyterLab serving DIR; ``--no-browser`` (passed on after ``--``) keeps it from opening a browser."""
    import json
    import re
    import signal
    import time
    import urllib.error
    import urllib.request

    from tests.browser_utils import free_port

    dest, port = tmp_path / "ws", free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")}
    env.update(
        HOME=str(tmp_path / "home"),  # none of the developer's Jupyter settings, runtime files or workspaces
        JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter-config"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "jupyter-runtime"),
        PYTHONPATH=str(ROOT),
    )
    lab_args = ["--no-browser", f"--port={port}", "--ServerApp.port_retries=0"]
    lab_args += ["--allow-root"] if os.geteuid() == 0 else []
    script = Path(sys.executable).parent / "trn-notebook-workshop"
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "trn_notebook.workshop"]
    log = tmp_path / "lab.log"
    with log.open("wb") as out:
        lab = subprocess.Popen(
            [*cli, str(dest), "--open", "--", *lab_args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # the CLI and the JupyterLab it runs: one group, stopped together below
        )
    try:
        deadline, url = time.monotonic() + 120, None
        while url is None and time.monotonic() < deadline and lab.poll() is None:
            found = re.search(rf"(http://127\.0\.0\.1:{port}/lab\?token=(\w+))", log.read_text(errors="replace"))
            url = found and found.group(2)
            time.sleep(0.5)
        text = log.read_text(errors="replace")
        assert url, f"no JupyterLab URL on 127.0.0.1:{port} within 120 s (exit {lab.poll()}):\n{text[-3000:]}"
        assert sorted(p.name for p in dest.glob("*.ipynb")) == EXAMPLES  # copied first
        base = f"http://127.0.0.1:{port}/api/contents"
        with urllib.request.urlopen(f"{base}?token={url}", timeout=30) as reply:
            served = sorted(c["name"] for c in json.load(reply)["content"] if c["name"].endswith(".ipynb"))
        assert served == EXAMPLES  # it serves DIR, the copied workshop
        with pytest.raises(urllib.error.HTTPError) as refused:  # and only to a peer holding the token
            urllib.request.urlopen(base, timeout=30)
        assert refused.value.code == 403
    finally:
        os.killpg(lab.pid, signal.SIGTERM)
        try:
            lab.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(lab.pid, signal.SIGKILL)
            lab.wait(30)


def test_jupyterlab_arguments_without_open_are_a_clear_error(tmp_path, capsys):
    with pytest.raises(SystemExit):
        workshop.main([str(tmp_path / "ws"), "--", "--no-browser"])
    assert "add --open" in capsys.readouterr().err
    assert not (tmp_path / "ws").exists()


def test_missing_workshop_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(workshop, "PACKAGE_DIR", tmp_path / "trn_notebook")
    with pytest.raises(workshop.WorkshopNotFoundError, match="reinstall trn-notebook"):
        workshop.workshop_dir()
    from trn_notebook import quickstart

    monkeypatch.setattr(quickstart, "workshop_dir", workshop.workshop_dir)
    assert quickstart.main([]) == 2


@pytest.mark.slow
def test_built_wheel_runs_the_quickstart_in_a_fresh_venv_outside_the_repository(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path / "dist")],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    (wheel,) = (tmp_path / "dist").glob("trn_notebook-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        declared = zf.read(entry_points).decode()
    assert {f"trn_notebook/examples/{n}" for n in EXAMPLES} <= names
    assert {f"trn_notebook/examples/docs/{n}" for n in workshop.WORKSHOP_DOCS} <= names  # what 05 and 11 cite
    assert "trn-notebook-workshop = trn_notebook.workshop:main" in declared
    assert "neuron_sim = trn_notebook.compiler.backend:neuron_backend" in declared

    # A fresh venv; its dependencies come from this interpreter's site-packages through a plain .pth line
    # (nothing downloaded, and that directory's own .pth files, e.g. an editable trn-notebook, are not run).
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    (purelib,) = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    (Path(purelib) / "outer_site.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    # The README's student line, as written, with pip aimed at the fresh venv and offline (--no-index: the
    # dependencies, the extras' too, are found installed through the .pth line).
    (line,) = [
        text
        for text in README.read_text(encoding="utf-8").splitlines()
        if text.startswith("pip install") and ".whl" in text
    ]
    install = line.split(" && ")[0]
    assert install == 'pip install "$(ls trn_notebook-*.whl)[lab,models]"', line  # the extras 01-14 need
    pip = f'"{sys.executable}" -m pip --python "{python}" install -q --no-index'
    done = subprocess.run(
        ["bash", "-e", "-c", install.replace("pip install", pip, 1)],
        cwd=wheel.parent,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and "does not provide the extra" not in done.stderr, done.stdout + done.stderr
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(OMP_NUM_THREADS="1", PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    where = subprocess.run(
        [python, "-c", "import trn_notebook; print(trn_notebook.__file__)"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert where.startswith(purelib), where  # the wheel's copy, not the checkout's

    quick = subprocess.run(
        [python, "-m", "trn_notebook.quickstart"], cwd=work, env=env, capture_output=True, text=True, timeout=600
    )
    assert quick.returncode == 0, quick.stdout + quick.stderr
    assert "quickstart: all checks passed" in quick.stdout
    assert "No handler found for comm target" not in quick.stdout + quick.stderr  # issue 34 item 9
    assert not any((Path(purelib) / "trn_notebook" / "examples").glob("*.json"))  # ran in a scratch copy

    copied = subprocess.run(
        [venv / "bin" / "trn-notebook-workshop", str(work / "ws")], cwd=work, env=env, capture_output=True, text=True
    )
    assert copied.returncode == 0, copied.stderr
    assert sorted(p.name for p in (work / "ws").glob("*.ipynb")) == EXAMPLES
    assert all((work / "ws" / "docs" / n).is_file() for n in workshop.WORKSHOP_DOCS)
