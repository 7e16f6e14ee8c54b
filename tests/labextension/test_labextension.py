"""The JupyterLab status-bar item: kernel comm, packaging of the prebuilt extension, real browser."""

from __future__ import annotations

import copy
import json
import os
import queue
import re
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import comm
import pytest
from tests.browser_utils import (
    REPO_ROOT,
    labextension_dir,
    launch_chromium,
    needs_chromium,
    open_notebook,
    start_jupyterlab,
    stop_jupyterlab,
    wait_cells_done,
    wait_kernel_idle,
    write_notebook,
)
from comm.base_comm import BaseComm
from IPython.core.interactiveshell import InteractiveShell
from IPython.testing import globalipapp

from trn_notebook.magics import status_comm
from trn_notebook.magics.status_comm import TARGET_NAME, StatusPayload, register, unregister
from trn_notebook.status import status_strings

BUILD_DIR = REPO_ROOT / "trn_notebook" / "labextension"
INSTALL_JSON = REPO_ROOT / "labextension" / "install.json"
GiB = 2**30


def make_payload(**changes: Any) -> StatusPayload:
    payload = StatusPayload(
        type="status",
        loaded=True,
        device="neuron:0",
        label="neuron:0 trn2 (sim)",
        chip="trn2",
        memory_allocated=0,
        memory_capacity=96 * GiB,
        cache_hits=0,
        cache_misses=0,
        fallback_ops=0,
        text="",
        title="",
    )
    payload.update(changes)  # type: ignore[typeddict-item]
    payload["text"], payload["title"] = status_strings(dict(payload))
    return payload


def with_strings(state: dict[str, Any]) -> StatusPayload:
    """A copy of ``state`` with its status-bar text and tooltip formatted from its current figures."""
    payload = dict(state)
    payload["text"], payload["title"] = status_strings(payload)
    return payload  # type: ignore[return-value]


# --- kernel side through a real IPython shell ------------------------------------------------


class RecordingComm(BaseComm):
    """Transport double: keeps what would go on the wire instead of publishing on IOPub."""

    sent: list[tuple[str, Any]]

    def __init__(self, **kwargs: Any) -> None:
        self.sent = []
        super().__init__(**kwargs)

    def publish_msg(
        self, msg_type: str, data: Any = None, metadata: Any = None, buffers: Any = None, **keys: Any
    ) -> None:
        self.sent.append((msg_type, copy.deepcopy(data)))


@pytest.fixture
def shell(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[InteractiveShell, list[RecordingComm]]]:
    """IPython's test shell with comm.create_comm recording instead of publishing; unregisters after."""
    ip = globalipapp.get_ipython()  # the module attribute: start_ipython() rebinds it
    unregister(ip)  # start clean should an earlier test have loaded the extension into this shell
    opened: list[RecordingComm] = []

    def create_comm(**kwargs: Any) -> RecordingComm:
        recording = RecordingComm(**kwargs)
        opened.append(recording)
        return recording

    monkeypatch.setattr(comm, "create_comm", create_comm)
    yield ip, opened
    unregister(ip)


def test_register_opens_comm_with_current_payload(shell):
    ip, opened = shell
    ip.user_ns["trn_state"] = state = make_payload(memory_allocated=512)
    register(ip, lambda: with_strings(state))

    assert len(opened) == 1
    assert opened[0].target_name == TARGET_NAME
    assert opened[0].sent == [("comm_open", make_payload(memory_allocated=512))]


def test_changed_payload_is_sent_after_the_cell(shell):
    ip, opened = shell
    ip.user_ns["trn_state"] = state = make_payload()
    register(ip, lambda: with_strings(state))

    assert ip.run_cell("trn_state['memory_allocated'] = 4 * 2**20; trn_state['cache_misses'] += 1").success

    assert opened[0].sent[1:] == [("comm_msg", make_payload(memory_allocated=4 * 2**20, cache_misses=1))]


def test_unchanged_payload_is_not_sent_again(shell):
    ip, opened = shell
    ip.user_ns["trn_state"] = state = make_payload()
    register(ip, lambda: with_strings(state))
    ip.run_cell("trn_state['fallback_ops'] = 2")
    ip.run_cell("x = 1 + 1")
    ip.run_cell("trn_state['fallback_ops'] = 2")

    assert [msg_type for msg_type, _ in opened[0].sent] == ["comm_open", "comm_msg"]


def test_register_twice_keeps_one_comm_and_one_hook(shell):
    ip, opened = shell
    state = make_payload()
    register(ip, lambda: with_strings(state))
    register(ip, lambda: make_payload(cache_hits=7))
    ip.run_cell("pass")

    assert len(opened) == 1
    assert opened[0].sent == [("comm_open", make_payload()), ("comm_msg", make_payload(cache_hits=7))]
    from trn_notebook.session.events import cell_finished

    assert ip.events.callbacks["post_run_cell"].count(cell_finished.emit) == 1  # one hook for every view
    subscribed = [r() for r in cell_finished._subs]
    assert sum(isinstance(getattr(fn, "__self__", None), status_comm.StatusComm) for fn in subscribed) == 1


def test_failing_payload_is_sent_as_error_data_and_cell_succeeds(shell):
    ip, opened = shell
    calls = {"n": 0}

    def payload() -> StatusPayload:
        calls["n"] += 1
        if calls["n"] > 1:
            raise RuntimeError("device state unavailable")
        return make_payload()

    register(ip, payload)
    assert ip.run_cell("y = 2").success

    assert opened[0].sent[1] == (
        "comm_msg",
        {"type": "error", "loaded": True, "message": "RuntimeError: device state unavailable"},
    )


def test_frontend_request_resends_the_payload(shell):
    ip, opened = shell
    register(ip, make_payload)
    opened[0].handle_msg({"content": {"comm_id": opened[0].comm_id, "data": {"type": "request"}}})

    assert opened[0].sent == [("comm_open", make_payload()), ("comm_msg", make_payload())]


def test_frontend_close_stops_sending_until_registered_again(shell):
    ip, opened = shell
    ip.user_ns["trn_state"] = state = make_payload()
    status = register(ip, lambda: with_strings(state))
    opened[0].handle_close({"content": {"comm_id": opened[0].comm_id, "data": {}}})
    ip.run_cell("trn_state['cache_hits'] = 3")

    assert not status.is_open
    assert opened[0].sent == [("comm_open", make_payload())]

    register(ip, lambda: with_strings(state))
    assert len(opened) == 2
    assert opened[1].sent == [("comm_open", make_payload(cache_hits=3))]


def test_unregister_closes_comm_and_removes_hook(shell):
    ip, opened = shell
    ip.user_ns["trn_state"] = state = make_payload()
    register(ip, lambda: with_strings(state))
    unregister(ip)
    ip.run_cell("trn_state['cache_hits'] = 1")
    unregister(ip)  # harmless twice

    assert opened[0].sent == [("comm_open", make_payload()), ("comm_close", {})]


# --- kernel side in a real ipykernel, read as the front end reads it -----------------------------

KERNEL_SETUP = """
from trn_notebook.magics.status_comm import register
from trn_notebook.status import status_strings
state = {"memory_allocated": 0}
def payload():
    p = {"type": "status", "loaded": True, "device": "neuron:0", "label": "neuron:0 trn2 (sim)",
         "chip": "trn2", "memory_allocated": state["memory_allocated"], "memory_capacity": 96 * 2**30,
         "cache_hits": 0, "cache_misses": 0, "fallback_ops": 0}
    p["text"], p["title"] = status_strings(p)
    return p
_status = register(get_ipython(), payload)
"""


def _iopub_until_idle(kc: Any, msg_id: str, timeout: float = 60) -> list[dict[str, Any]]:
    """IOPub messages answering ``msg_id``, up to its ``idle`` status."""
    messages = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            msg = kc.get_iopub_msg(timeout=1)
        except queue.Empty:
            continue
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        messages.append(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return messages
    raise TimeoutError(f"kernel did not go idle after {msg_id}")


def _comm_traffic(messages: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    return [(m["msg_type"], m["content"]["data"]) for m in messages if m["msg_type"].startswith("comm_")]


@pytest.mark.slow
def test_real_kernel_sends_status_on_iopub_only_when_changed():
    from jupyter_client.manager import start_new_kernel

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    km, kc = start_new_kernel(kernel_name="python3", env=env)
    try:

        def execute(code: str) -> list[tuple[str, Any]]:
            msg_id = kc.execute(code)
            reply = kc.get_shell_msg(timeout=60)
            assert reply["content"]["status"] == "ok", reply["content"]
            return _comm_traffic(_iopub_until_idle(kc, msg_id))

        opened = execute(KERNEL_SETUP)
        changed = execute("state['memory_allocated'] = 3 * 2**20")
        unchanged = execute("z = 40 + 2")

        assert opened == [("comm_open", make_payload())]
        assert changed == [("comm_msg", make_payload(memory_allocated=3 * 2**20))]
        assert unchanged == []

        # What the front end does after a page reload: find the comm, ask for the payload.
        info = kc.comm_info(target_name=TARGET_NAME, reply=True, timeout=30)
        comm_ids = list(info["content"]["comms"])
        assert len(comm_ids) == 1
        msg = kc.session.msg("comm_msg", {"comm_id": comm_ids[0], "data": {"type": "request"}})
        kc.shell_channel.send(msg)
        answer = _comm_traffic(_iopub_until_idle(kc, msg["header"]["msg_id"]))
        assert answer == [("comm_msg", make_payload(memory_allocated=3 * 2**20))]
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


# --- packaging -------------------------------------------------------------------------------


def _committed_build() -> dict[str, Any]:
    return json.loads((BUILD_DIR / "package.json").read_text())


def test_committed_build_names_its_entry_point():
    package = _committed_build()
    load = package["jupyterlab"]["_build"]["load"]

    assert package["name"] == "trn-notebook"
    assert (BUILD_DIR / load).is_file()
    assert json.loads(INSTALL_JSON.read_text())["packageName"] == "trn-notebook"


@pytest.mark.slow
def test_wheel_ships_prebuilt_extension_that_jupyterlab_lists(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path)],
        cwd=REPO_ROOT,
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("trn_notebook-*.whl")
    prefix = "trn_notebook-0.1.0.data/data/share/jupyter/labextensions/trn-notebook/"
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        shipped_package = json.loads(zf.read(prefix + "package.json"))
    static = {f"{prefix}static/{p.name}" for p in (BUILD_DIR / "static").iterdir()}

    assert {prefix + "package.json", prefix + "install.json"} <= names
    assert static <= names
    assert prefix + shipped_package["jupyterlab"]["_build"]["load"] in names
    assert shipped_package == _committed_build()
    assert not any("node_modules" in name for name in names)

    # Lay the wheel's data files out as an installer would (`pip install --prefix` must not be used here:
    # it uninstalls the trn-notebook the tests are running from), then ask JupyterLab whether it is usable.
    target = tmp_path / "prefix"
    with zipfile.ZipFile(wheel) as zf:
        data_root = "trn_notebook-0.1.0.data/data/"
        for name in zf.namelist():
            if name.startswith(data_root) and not name.endswith("/"):
                dest = target / name[len(data_root) :]
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(zf.read(name))
    listed = subprocess.run(
        [sys.executable, "-m", "jupyterlab.labextensions", "list"],
        env={**os.environ, "JUPYTER_PATH": str(target / "share" / "jupyter")},
        capture_output=True,
        text=True,
        check=True,
    )
    output = re.sub(r"\x1b\[[0-9;]*m", "", listed.stdout + listed.stderr)
    section = output.split(str(target / "share" / "jupyter" / "labextensions"), 1)[1].split("\n\n", 1)[0]
    assert re.search(r"trn-notebook v0\.1\.0 enabled\s+OK", section), output


# --- real browser ------------------------------------------------------------------------------

STATUS = "#trn-notebook-status"

NOTEBOOK_SETUP = """\
from IPython.core.magic import register_line_magic
from trn_notebook.magics.status_comm import register

@register_line_magic
def trn(line):  # stands in for the real %trn until this notebook uses %load_ext trn_notebook
    print(f"stub trn magic ran: {line}")

state = {"memory_allocated": 0}

from trn_notebook.status import status_strings

def payload():
    p = {"type": "status", "loaded": True, "device": "neuron:0", "label": "neuron:0 trn2 (sim)",
         "chip": "trn2", "memory_allocated": state["memory_allocated"], "memory_capacity": 96 * 2**30,
         "cache_hits": 2, "cache_misses": 1, "fallback_ops": 0}
    p["text"], p["title"] = status_strings(p)
    return p

_status = register(get_ipython(), payload)"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A JupyterLab server that loads the committed build of the extension; yields (url, root)."""
    root = tmp_path_factory.mktemp("lab")
    extensions = labextension_dir("trn-notebook", BUILD_DIR, INSTALL_JSON)
    url, process = start_jupyterlab(root, extra_labextensions_path=[extensions])
    try:
        yield url, root
    finally:
        stop_jupyterlab(process)


@pytest.fixture(scope="module")
def browser(lab: tuple[str, Path]) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = launch_chromium(pw)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    try:
        yield page
    finally:
        # Shut this test's kernels down: two cores, and kernels outlive pages.
        try:
            page.evaluate("() => window.jupyterapp?.serviceManager.sessions.shutdownAll()")
        finally:
            page.close()


@pytest.fixture(scope="module")
def screenshots() -> Path:
    """Where screenshots go: $TRN_SCREENSHOT_DIR (e.g. a CI artifact folder) or a temp dir."""
    path = Path(os.environ.get("TRN_SCREENSHOT_DIR") or tempfile.mkdtemp(prefix="trn-screenshots-"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def status_text(page: Any) -> str:
    return str(page.locator(STATUS).text_content())


def wait_status(page: Any, pattern: str, timeout: float = 30_000) -> str:
    """Wait until the status item's text matches the regular expression ``pattern``."""
    try:
        page.wait_for_function(
            "([sel, pattern]) => new RegExp(pattern).test(document.querySelector(sel)?.textContent ?? '')",
            arg=[STATUS, pattern],
            timeout=timeout,
        )
    except Exception as exc:
        raise AssertionError(
            f"status item never matched {pattern!r}; it shows {status_text(page)!r}; cell errors: {cell_errors(page)}"
        ) from exc
    return status_text(page)


def cell_errors(page: Any) -> list[str]:
    return [str(t) for t in page.locator(".jp-OutputArea-output[data-mime-type*='stderr']").all_text_contents()]


def run_next_cell(page: Any) -> None:
    """Shift+Enter on the active cell, as a user would, and wait for the kernel to finish."""
    page.keyboard.press("Shift+Enter")
    wait_cells_done(page)


def cells(page: Any) -> list[tuple[str, str, str]]:
    """(prompt, source, output text) of every cell in the current notebook."""
    return page.evaluate(
        """() => [...window.jupyterapp.shell.currentWidget.node.querySelectorAll('.jp-Cell')].map(c => [
            c.querySelector('.jp-InputPrompt')?.textContent ?? '',
            c.querySelector('.jp-InputArea-editor')?.innerText ?? '',
            c.querySelector('.jp-OutputArea')?.innerText ?? '',
        ])"""
    )


def click_status_and_wait_for_dashboard(page: Any) -> tuple[str, str, str]:
    """Click the status item; return (prompt, source, output) of the cell it inserted below the active one."""
    before = len(cells(page))
    active = page.evaluate("() => window.jupyterapp.shell.currentWidget.content.activeCellIndex")
    page.locator(STATUS).click()
    page.wait_for_function(
        "n => window.jupyterapp.shell.currentWidget.node.querySelectorAll('.jp-Cell').length > n", arg=before
    )
    wait_cells_done(page)
    page.wait_for_function(
        """() => {
            const cell = window.jupyterapp.shell.currentWidget.content.activeCell;
            return /\\[\\d+\\]/.test(cell.node.querySelector('.jp-InputPrompt').textContent);
        }"""
    )
    after = cells(page)
    assert len(after) == before + 1
    return after[active + 1]


def assert_committed_build_loaded(page: Any) -> None:
    config = json.loads(page.locator("#jupyter-config-data").text_content())
    loaded = {ext["name"]: ext for ext in config["federated_extensions"]}
    assert loaded["trn-notebook"]["load"] == _committed_build()["jupyterlab"]["_build"]["load"]


@pytest.mark.browser
@pytest.mark.slow
@needs_chromium
def test_status_item_shows_kernel_state_and_opens_dashboard(lab, page, screenshots):
    url, root = lab
    write_notebook(root / "status.ipynb", [NOTEBOOK_SETUP, 'state["memory_allocated"] = 3 * 2**20'])
    open_notebook(page, url, "status.ipynb")
    assert_committed_build_loaded(page)
    assert status_text(page) == "trn: not loaded"

    page.locator(".jp-Cell").first.click()
    run_next_cell(page)
    first = wait_status(page, r"^neuron:0 trn2 \(sim\) · 0 B / 96\.00 GiB · cache 2 hit 1 miss · fallback 0$")
    run_next_cell(page)
    second = wait_status(page, r"3\.00 MiB / 96\.00 GiB")
    page.screenshot(path=str(screenshots / "status-item.png"))

    assert second == "neuron:0 trn2 (sim) · 3.00 MiB / 96.00 GiB · cache 2 hit 1 miss · fallback 0"
    assert first != second
    assert "memory allocated: 3.00 MiB / 96.00 GiB" in str(page.locator(STATUS).get_attribute("title"))

    prompt, source, output = click_status_and_wait_for_dashboard(page)
    page.screenshot(path=str(screenshots / "status-item-dashboard.png"))
    assert source.strip() == "%trn dashboard"
    assert prompt.strip() == "[3]:"
    assert output.strip() == "stub trn magic ran: dashboard"


@pytest.mark.browser
@pytest.mark.slow
@needs_chromium
def test_status_item_follows_notebook_switch_reload_and_restart(lab, page):
    url, root = lab
    write_notebook(root / "loaded.ipynb", [NOTEBOOK_SETUP, 'state["memory_allocated"] = 5 * 2**20'])
    write_notebook(root / "plain.ipynb", ["1 + 1"])
    open_notebook(page, url, "loaded.ipynb")
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    wait_cells_done(page)
    wait_status(page, r"5\.00 MiB")

    # Switching to a notebook whose kernel has no trn_notebook, and back.
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:open', {path: 'plain.ipynb'})")
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="plain.ipynb").click()
    wait_kernel_idle(page)
    assert wait_status(page, r"^trn: not loaded$") == "trn: not loaded"
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="loaded.ipynb").click()
    assert "5.00 MiB" in wait_status(page, r"5\.00 MiB")

    # A page reload reconnects to the same kernel: the item finds the open comm again.
    page.reload()
    page.locator(".jp-NotebookPanel").first.wait_for()
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="loaded.ipynb").click()
    wait_kernel_idle(page)
    assert "5.00 MiB" in wait_status(page, r"5\.00 MiB")

    # A restarted kernel has not loaded trn_notebook until the cells run again.
    page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.restartKernel()")
    wait_status(page, r"^trn: not loaded$")
    wait_kernel_idle(page)
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    wait_cells_done(page)
    assert "5.00 MiB" in wait_status(page, r"5\.00 MiB")


def _trn_extension_missing() -> str | None:
    import trn_notebook

    if hasattr(trn_notebook, "load_ipython_extension"):
        return None
    return "trn_notebook has no load_ipython_extension yet (the %trn magics are being written)"


@pytest.mark.browser
@pytest.mark.slow
@needs_chromium
def test_status_item_with_trn_extension_loaded(lab, page, screenshots):
    reason = _trn_extension_missing()
    if reason:
        pytest.skip(reason)
    url, root = lab
    write_notebook(
        root / "extension.ipynb",
        [
            "%load_ext trn_notebook",
            "%trn device neuron",
            'import torch\nx = torch.ones(1024, 1024, device="neuron")',
        ],
    )
    open_notebook(page, url, "extension.ipynb")
    page.locator(".jp-Cell").first.click()
    run_next_cell(page)
    wait_status(page, r"^(neuron:0|cpu)")
    run_next_cell(page)
    before = wait_status(page, r"^neuron:0 trn2 \(sim\) · ")
    run_next_cell(page)
    page.wait_for_function(
        "([sel, text]) => document.querySelector(sel).textContent !== text", arg=[STATUS, before], timeout=30_000
    )
    after = status_text(page)
    page.screenshot(path=str(screenshots / "status-item-trn-extension.png"))

    memory = re.compile(r" · (.+?) / ")
    assert after.startswith("neuron:0 trn2 (sim) · ")
    assert memory.search(before).group(1) != memory.search(after).group(1)  # type: ignore[union-attr]

    prompt, source, _ = click_status_and_wait_for_dashboard(page)
    page.screenshot(path=str(screenshots / "status-item-trn-extension-dashboard.png"))
    assert source.strip() == "%trn dashboard"
    assert re.fullmatch(r"\[\d+\]:", prompt.strip())
    assert cell_errors(page) == []
