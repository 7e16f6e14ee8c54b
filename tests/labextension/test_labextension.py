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
from comm.base_comm import BaseComm, CommManager
from IPython.core.interactiveshell import InteractiveShell
from IPython.testing import globalipapp

from tests.browser_utils import (
    REPO_ROOT,
)
from trn_notebook.magics import status_comm
from trn_notebook.facts.status import StatusPayload
from trn_notebook.magics.status_comm import TARGET_NAME, register, unregister
from trn_notebook.display.format import fmt_compile
from trn_notebook.facts.status import status_strings

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
        compile_s=0.0,
        modeled_compile_s=None,
        compile_text="",
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


class FrontEnd:
    """What JupyterLab sends to the kernel's real comm manager (``comm.base_comm.CommManager``)."""

    def __init__(self, manager: CommManager, created: list[RecordingComm]) -> None:
        self.manager, self.created = manager, created

    def open(self) -> RecordingComm:
        """``kernel.createComm(TARGET_NAME).open({type: 'request'})``: the kernel-side comm it made."""
        comm_id = f"frontend-{len(self.created)}"
        content = {"comm_id": comm_id, "target_name": TARGET_NAME, "data": {"type": "request"}}
        self.manager.comm_open(None, None, {"content": content})  # type: ignore[arg-type]
        return self.created[-1]

    def request(self, opened: RecordingComm) -> None:
        content = {"comm_id": opened.comm_id, "data": {"type": "request"}}
        self.manager.comm_msg(None, None, {"content": content})  # type: ignore[arg-type]

    def close(self, opened: RecordingComm) -> None:
        self.manager.comm_close(None, None, {"content": {"comm_id": opened.comm_id, "data": {}}})  # type: ignore[arg-type]


@pytest.fixture
def shell(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[InteractiveShell, FrontEnd]]:
    """IPython's test shell, a real comm manager of its own, comms recording instead of publishing."""
    ip = globalipapp.get_ipython()  # the module attribute: start_ipython() rebinds it
    unregister(ip)  # start clean should an earlier test have loaded the extension into this shell
    manager = CommManager()
    created: list[RecordingComm] = []

    def create_comm(**kwargs: Any) -> RecordingComm:
        recording = RecordingComm(**kwargs)
        created.append(recording)
        return recording

    monkeypatch.setattr(comm, "create_comm", create_comm)
    monkeypatch.setattr(comm, "get_comm_manager", lambda: manager)
    yield ip, FrontEnd(manager, created)
    unregister(ip)


def test_register_opens_no_comm_and_a_frontend_open_gets_the_payload(shell):
    ip, frontend = shell
    ip.user_ns["trn_state"] = state = make_payload(memory_allocated=512)
    register(ip, lambda: with_strings(state))

    assert frontend.created == []  # nothing goes on the wire until a front end asks
    assert TARGET_NAME in frontend.manager.targets
    opened = frontend.open()
    assert opened.sent == [("comm_msg", make_payload(memory_allocated=512))]
    assert status_comm._registered[ip].is_open


def test_frontend_open_before_the_target_is_registered_is_closed_and_retry_works(shell):
    ip, frontend = shell
    early = frontend.open()
    assert early.sent == [("comm_close", {})]  # what the front end reads as "target not registered yet"

    register(ip, make_payload)
    assert frontend.open().sent == [("comm_msg", make_payload())]


def test_nothing_is_computed_while_no_frontend_has_a_comm_open(shell):
    ip, _ = shell
    calls = {"n": 0}

    def payload() -> StatusPayload:
        calls["n"] += 1
        return make_payload()

    register(ip, payload)
    ip.run_cell("x = 1")
    ip.run_cell("x = 2")
    assert calls["n"] == 0


def test_changed_payload_is_sent_after_the_cell_to_every_open_comm(shell):
    ip, frontend = shell
    ip.user_ns["trn_state"] = state = make_payload()
    register(ip, lambda: with_strings(state))
    first, second = frontend.open(), frontend.open()  # e.g. two browser tabs on one kernel

    assert ip.run_cell("trn_state['memory_allocated'] = 4 * 2**20; trn_state['cache_misses'] += 1").success

    changed = ("comm_msg", make_payload(memory_allocated=4 * 2**20, cache_misses=1))
    assert first.sent == [("comm_msg", make_payload()), changed]
    assert second.sent == [("comm_msg", make_payload()), changed]


def test_unchanged_payload_is_not_sent_again(shell):
    ip, frontend = shell
    ip.user_ns["trn_state"] = state = make_payload()
    register(ip, lambda: with_strings(state))
    opened = frontend.open()
    ip.run_cell("trn_state['fallback_ops'] = 2")
    ip.run_cell("x = 1 + 1")
    ip.run_cell("trn_state['fallback_ops'] = 2")

    assert [msg_type for msg_type, _ in opened.sent] == ["comm_msg", "comm_msg"]


def test_register_twice_keeps_one_target_and_one_hook(shell):
    ip, frontend = shell
    state = make_payload()
    register(ip, lambda: with_strings(state))
    opened = frontend.open()
    register(ip, lambda: make_payload(cache_hits=7))
    ip.run_cell("pass")

    assert len(frontend.created) == 1
    assert opened.sent == [("comm_msg", make_payload()), ("comm_msg", make_payload(cache_hits=7))]
    assert frontend.manager.targets[TARGET_NAME] == status_comm._registered[ip].attach
    from trn_notebook.session.events import cell_finished

    assert ip.events.callbacks["post_run_cell"].count(cell_finished.emit) == 1  # one hook for every view
    subscribed = [r() for r in cell_finished._subs]
    assert sum(isinstance(getattr(fn, "__self__", None), status_comm.StatusComm) for fn in subscribed) == 1


def test_failing_payload_is_sent_as_error_data_and_cell_succeeds(shell):
    ip, frontend = shell
    calls = {"n": 0}

    def payload() -> StatusPayload:
        calls["n"] += 1
        if calls["n"] > 1:
            raise RuntimeError("device state unavailable")
        return make_payload()

    register(ip, payload)
    opened = frontend.open()
    assert ip.run_cell("y = 2").success

    assert opened.sent[1] == (
        "comm_msg",
        {"type": "error", "loaded": True, "message": "RuntimeError: device state unavailable"},
    )


def test_frontend_request_resends_the_payload_on_its_comm(shell):
    ip, frontend = shell
    register(ip, make_payload)
    opened, other = frontend.open(), frontend.open()
    frontend.request(opened)

    assert opened.sent == [("comm_msg", make_payload()), ("comm_msg", make_payload())]
    assert other.sent == [("comm_msg", make_payload())]


def test_frontend_close_stops_sending_on_that_comm_only(shell):
    ip, frontend = shell
    ip.user_ns["trn_state"] = state = make_payload()
    status = register(ip, lambda: with_strings(state))
    closed, kept = frontend.open(), frontend.open()
    frontend.close(closed)
    ip.run_cell("trn_state['cache_hits'] = 3")

    assert closed.sent == [("comm_msg", make_payload())]
    assert kept.sent == [("comm_msg", make_payload()), ("comm_msg", make_payload(cache_hits=3))]
    frontend.close(kept)
    assert not status.is_open
    assert frontend.open().sent == [("comm_msg", make_payload(cache_hits=3))]  # opening again works


def test_unregister_closes_comms_and_the_target(shell):
    ip, frontend = shell
    ip.user_ns["trn_state"] = state = make_payload()
    register(ip, lambda: with_strings(state))
    opened = frontend.open()
    unregister(ip)
    ip.run_cell("trn_state['cache_hits'] = 1")
    unregister(ip)  # harmless twice

    assert opened.sent == [("comm_msg", make_payload()), ("comm_close", {})]
    assert TARGET_NAME not in frontend.manager.targets
    assert frontend.open().sent == [("comm_close", {})]


def test_status_line_shows_the_modeled_compile_beside_the_measured_one():
    before = make_payload()
    after = make_payload(compile_s=1.007, modeled_compile_s=234.0, compile_text=fmt_compile(1.007, 234.0))

    assert "compile" not in before["text"] and "nothing compiled yet" in before["title"]
    assert after["text"].endswith(" · fallback 0 · modeled compile 3.9 min")
    assert "compile: measured (simulator) 1.007 s · modeled Neuron compile 3.9 min (" in after["title"]
    assert "Trinity-Mini" in after["title"]  # where the modeled figure's constant comes from
    unmodeled = make_payload(compile_s=2.5, compile_text=fmt_compile(2.5, None))  # e.g. hardware records
    assert unmodeled["text"].endswith(" · compile 2.500 s measured")
    assert "modeled: n/a" in unmodeled["title"]


# --- kernel side in a real ipykernel, read as the front end reads it -----------------------------

KERNEL_SETUP = """
from trn_notebook.magics.status_comm import register
from trn_notebook.display.format import fmt_compile
from trn_notebook.facts.status import status_strings
state = {"memory_allocated": 0}
def payload():
    p = {"type": "status", "loaded": True, "device": "neuron:0", "label": "neuron:0 trn2 (sim)",
         "chip": "trn2", "memory_allocated": state["memory_allocated"], "memory_capacity": 96 * 2**30,
         "cache_hits": 0, "cache_misses": 0, "fallback_ops": 0, "compile_s": 0.0, "modeled_compile_s": None,
         "compile_text": ""}
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


def _kernel_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}


@pytest.mark.slow
def test_real_kernel_sends_status_only_over_the_comm_the_frontend_opened():
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3", env=_kernel_env())
    try:

        def execute(code: str) -> list[tuple[str, Any]]:
            msg_id = kc.execute(code)
            reply = kc.get_shell_msg(timeout=60)
            assert reply["content"]["status"] == "ok", reply["content"]
            return _comm_traffic(_iopub_until_idle(kc, msg_id))

        def send(msg_type: str, content: dict[str, Any]) -> list[tuple[str, Any]]:
            msg = kc.session.msg(msg_type, content)
            kc.shell_channel.send(msg)
            return _comm_traffic(_iopub_until_idle(kc, msg["header"]["msg_id"]))

        def frontend_open(comm_id: str) -> list[tuple[str, Any]]:
            return send("comm_open", {"comm_id": comm_id, "target_name": TARGET_NAME, "data": {"type": "request"}})

        assert frontend_open("too-early") == [("comm_close", {})]  # not loaded yet: the front end retries later
        assert execute(KERNEL_SETUP) == []  # registering sends nothing
        assert frontend_open("lab") == [("comm_msg", make_payload())]
        assert execute("state['memory_allocated'] = 3 * 2**20") == [
            ("comm_msg", make_payload(memory_allocated=3 * 2**20))
        ]
        assert execute("z = 40 + 2") == []

        # What the front end does after a page reload: find the comm, ask for the payload.
        info = kc.comm_info(target_name=TARGET_NAME, reply=True, timeout=30)
        assert list(info["content"]["comms"]) == ["lab"]
        answer = send("comm_msg", {"comm_id": "lab", "data": {"type": "request"}})
        assert answer == [("comm_msg", make_payload(memory_allocated=3 * 2**20))]
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@pytest.mark.slow
def test_headless_run_of_a_notebook_loading_the_extension_logs_no_comm_warning(tmp_path):
    # Issue 34: the kernel opened the status comm whether or not a front end had registered it, so
    # nbconvert (nbclient), papermill and the quickstart logged "No handler found for comm target" per run.
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in ("%load_ext trn_notebook", "%trn device neuron", "print(1 + 1)")]
    nbformat.write(nb, tmp_path / "load.ipynb")
    run = subprocess.run(
        [sys.executable, "-m", "nbconvert", "--to", "notebook", "--execute", "--stdout", str(tmp_path / "load.ipynb")],
        env=_kernel_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr
    executed = nbformat.reads(run.stdout, as_version=4)
    assert executed.cells[2].outputs[0]["text"] == "2\n"
    assert "No handler found" not in run.stderr
    assert not re.search(r"comm[ _](target|open)", run.stderr, re.IGNORECASE), run.stderr


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
