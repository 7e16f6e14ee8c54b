"""A CLI whose optional dependency is missing names the extra to install, before doing any work."""

from __future__ import annotations

import subprocess
import sys

import pytest

from trn_notebook import extras


def test_the_extra_is_read_from_the_package_metadata():
    assert extras.extra_for("transformers") == "models"  # the smallest extra listing it (dev lists it too)
    assert extras.extra_for("expecttest") == "compat"
    assert extras.extra_for("Expect_Test") is None  # a different distribution name
    assert extras.extra_for("no-such-distribution") is None
    assert extras.missing_message("json", "anything") is None


_WATCHING = [False]
_STARTED: list[str] = []


def _audit(event: str, args: tuple, watching: list[bool] = _WATCHING, started: list[str] = _STARTED) -> None:
    """Records every process start (subprocess, multiprocessing, os.exec/spawn) while a test watches.

    The lists are bound as defaults: at interpreter exit the module's globals are cleared while the hook lives on.
    """
    if watching[0] and event in {"subprocess.Popen", "os.posix_spawn", "os.exec", "os.fork", "os.spawn"}:
        started.append(f"{event} {args[:2]!r}")


sys.addaudithook(_audit)  # audit hooks cannot be removed; this one only records while _WATCHING


def _hide(monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # find_spec() says "not installed", import raises


def test_zoo_without_transformers_says_which_extra_before_any_work(monkeypatch, capsys):
    from trn_notebook.zoo.__main__ import main

    _hide(monkeypatch, "transformers")
    _STARTED.clear()
    _WATCHING[0] = True
    try:
        assert main(["--quick"]) == 2
    finally:
        _WATCHING[0] = False
    assert not _STARTED, f"a process was started before the missing extra was named: {_STARTED}"
    out, err = capsys.readouterr()
    assert not out, out  # no model was run (each prints its line)
    assert "transformers" in err and '"trn-notebook[models]"' in err and '-e ".[models]"' in err, err


def test_compat_without_expecttest_says_which_extra(monkeypatch, capsys):
    from trn_notebook.compat.__main__ import main
    from trn_notebook.session import views

    _hide(monkeypatch, "expecttest")
    assert main(["--quick"]) == 2
    err = capsys.readouterr().err
    assert "expecttest" in err and '"trn-notebook[compat]"' in err, err
    message = views.compatibility("add")  # %trn ops --table: a message, not a traceback
    assert "trn-notebook[compat]" in message.text(), message


@pytest.mark.slow
def test_every_public_subpackage_the_readme_names_is_an_attribute_after_import():
    code = (
        "import trn_notebook as t; "
        "assert callable(t.cache.export) and callable(t.cache.import_); "
        "assert callable(t.nki.nki_op) and callable(t.compat.compatibility_table) and callable(t.zoo.run_zoo); "
        "assert callable(t.facts.current) and callable(t.device.policy_table); "
        "import sys; print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
