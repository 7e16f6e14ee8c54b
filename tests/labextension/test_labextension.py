"""The JupyterLab status-bar item: the kernel comm (IPython shell and a real ipykernel) and packaging of the prebuilt extension."""

from __future__ import annotations

import copy
import json
import os
import queue
import re
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from typing import Any

import comm
import pytest
from comm.base_comm import BaseComm
from IPython.core.interactiveshell import InteractiveShell
from IPython.testing import globalipapp

from tests.browser_utils import (
    REPO_ROOT,
)
from trn_notebook.magics import status_comm
from trn_notebook.magics.status_comm import TARGET_NAME, StatusPayload, register, unregister
from trn_notebook.status import status_strings

from .build import BUILD_DIR, INSTALL_JSON, committed_build

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


def test_committed_build_names_its_entry_point():
    package = committed_build()
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
    assert shipped_package == committed_build()
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
