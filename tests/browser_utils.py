"""Helpers for real-browser tests: a throwaway JupyterLab server and Debian Chromium via Playwright.

Typical use in a test module::

    pytestmark = [pytest.mark.browser, pytest.mark.slow, needs_chromium]

    @pytest.fixture(scope="module")
    def lab(tmp_path_factory):
        root = tmp_path_factory.mktemp("lab")
        url, process = start_jupyterlab(root)
        yield url, root
        stop_jupyterlab(process)

    def test_x(lab):
        with sync_playwright() as pw:
            browser = launch_chromium(pw)
            page = browser.new_page()
            open_notebook(page, lab[0], "x.ipynb")

Never run ``playwright install``: the browser is Debian's ``chromium`` package.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Playwright

REPO_ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason=f"{CHROMIUM} is missing: install Debian's browser with `apt-get install -y chromium`",
)

# JupyterLab user settings that keep a test session quiet and offline.
_QUIET_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}


def free_port() -> int:
    """Ask the OS for a TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_jupyterlab(
    root_dir: Path,
    *,
    extra_labextensions_path: Sequence[Path] = (),
    env: dict[str, str] | None = None,
    user_settings: dict[str, dict[str, Any]] | None = None,
    timeout: float = 90.0,
) -> tuple[str, subprocess.Popen[bytes]]:
    """Start JupyterLab on 127.0.0.1 (token off) serving ``root_dir``; return ``(url, process)``.

    The server keeps its user settings, workspaces and log in ``root_dir/.lab-state`` so
    tests see neither the developer's settings nor each other's. Kernels get the
    repository on ``PYTHONPATH``, so ``import trn_notebook`` works without installing it.
    ``window.jupyterapp`` is exposed for tests. ``user_settings`` adds user settings
    (``"<plugin id>/<file>.jupyterlab-settings": {...}``) to the quiet defaults. Stop it with
    :func:`stop_jupyterlab`.
    """
    root_dir = Path(root_dir)
    state = root_dir / ".lab-state"
    settings = state / "settings"
    for name, values in {**_QUIET_SETTINGS, **(user_settings or {})}.items():
        plugin, _, file = name.rpartition("/")
        target = settings / plugin / file
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(values))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--allow-root",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        "--IdentityProvider.token=",
        "--ServerApp.password=",
        f"--ServerApp.root_dir={root_dir}",
        "--LabApp.expose_app_in_browser=True",
        *(f"--LabApp.extra_labextensions_path={path}" for path in extra_labextensions_path),
    ]
    full_env = {
        **os.environ,
        "JUPYTERLAB_SETTINGS_DIR": str(settings),
        "JUPYTERLAB_WORKSPACES_DIR": str(state / "workspaces"),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
        **(env or {}),
    }
    # A kernel started under pytest sees PYTEST_CURRENT_TEST and then does not forward what C++ writes to
    # its stderr (ipykernel's fd capture stands down for pytest): drop it so cells show what a student sees.
    full_env.pop("PYTEST_CURRENT_TEST", None)
    log_path = state / "server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(cmd, cwd=root_dir, env=full_env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        try:
            with urllib.request.urlopen(f"{url}/api/status", timeout=2) as response:
                if response.status == 200:
                    return url, process
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.25)
    stop_jupyterlab(process)
    tail = log_path.read_text(errors="replace")[-3000:]
    raise RuntimeError(f"JupyterLab did not answer on {url} within {timeout:.0f} s; log tail:\n{tail}")


def stop_jupyterlab(process: subprocess.Popen[bytes], timeout: float = 15.0) -> None:
    """Stop a server from :func:`start_jupyterlab` (SIGTERM, then SIGKILL); its kernels go with it."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout)


def labextension_dir(name: str, build_dir: Path, install_json: Path | None = None) -> Path:
    """Lay out a prebuilt extension as an installed wheel would, in a fresh temp dir.

    Returns a directory to pass as ``extra_labextensions_path``; it holds ``name/``
    with a copy of ``build_dir`` (package.json, static/) and ``install.json``.
    """
    parent = Path(tempfile.mkdtemp(prefix="labext-"))
    shutil.copytree(build_dir, parent / name)
    if install_json is not None:
        shutil.copy(install_json, parent / name / "install.json")
    return parent


def launch_chromium(playwright: Playwright, *, headless: bool = True) -> Browser:
    """Launch Debian's Chromium (never a Playwright download) with CI-safe flags."""
    return playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=headless)


def write_notebook(path: Path, sources: Sequence[str]) -> Path:
    """Write a Python 3 notebook whose code cells hold ``sources``."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    path.write_text(nbformat.writes(nb))
    return path


def open_notebook(page: Page, url: str, name: str, timeout: float = 60_000) -> None:
    """Open ``name`` (relative to the server root) in a fresh workspace; wait until its kernel is idle.

    ``?reset`` drops tabs a previous page left in the workspace, so earlier tests'
    notebooks (and their kernels) do not come back.
    """
    page.goto(f"{url}/lab/tree/{name}?reset")
    page.locator(".jp-NotebookPanel").first.wait_for(timeout=timeout)
    wait_kernel_idle(page, timeout)


def wait_kernel_idle(page: Page, timeout: float = 60_000) -> None:
    """Wait until the current notebook's kernel is started and idle."""
    page.wait_for_function(
        """() => {
            const panel = window.jupyterapp?.shell.currentWidget;
            const kernel = panel?.sessionContext?.session?.kernel;
            return !!kernel && kernel.connectionStatus === 'connected' && kernel.status === 'idle';
        }""",
        timeout=timeout,
    )


def run_command(page: Page, command: str, args: dict[str, Any] | None = None) -> Any:
    """Execute a JupyterLab command (e.g. ``notebook:run-all-cells``) and return its result."""
    return page.evaluate(
        "([command, args]) => window.jupyterapp.commands.execute(command, args)", [command, args or {}]
    )


def run_all_cells(page: Page, timeout: float = 60_000) -> None:
    """Run every cell of the current notebook and wait until the kernel is idle again."""
    # The command's promise settles once every cell has finished executing.
    run_command(page, "notebook:run-all-cells")
    wait_cells_done(page, timeout)


def wait_cells_done(page: Page, timeout: float = 60_000) -> None:
    """Wait until no cell of the current notebook is queued or running (prompt ``[*]``)."""
    page.wait_for_function(
        """() => {
            const panel = window.jupyterapp.shell.currentWidget;
            const prompts = panel.node.querySelectorAll('.jp-InputArea-prompt');
            const busy = [...prompts].some(p => p.textContent.includes('*'));
            return !busy && panel.sessionContext.session?.kernel?.status === 'idle';
        }""",
        timeout=timeout,
    )
