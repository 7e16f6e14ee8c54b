"""The real NKI wins: when an `nki` package with jit/language is importable, ours stands down."""

from __future__ import annotations

import sys

from trn_notebook.nki.standdown import real_nki


def test_real_nki_is_found_and_can_be_overridden(tmp_path, monkeypatch):
    pkg = tmp_path / "nki"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("def jit(f):\n    return f\nlanguage = object()\nisa = object()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "nki", raising=False)
    try:
        found = real_nki()
        assert found is not None and found.__name__ == "nki"
        monkeypatch.setenv("TRN_NOTEBOOK_FORCE_NKI_SIM", "1")
        assert real_nki() is None
    finally:
        sys.modules.pop("nki", None)


def test_without_a_real_nki_the_simulator_is_used():
    assert real_nki() is None
