"""Repository rules that are cheap to check: lint, formatting, file size, no pickle, no CDN."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "trn_notebook"


def _ruff(*args: str) -> subprocess.CompletedProcess:
    exe = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    return subprocess.run([exe, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_ruff_lint_and_format_are_clean():
    lint = _ruff("check", ".", "--output-format", "concise")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    fmt = _ruff("format", "--check", ".")
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_modules_stay_small_and_never_unpickle(path: Path):
    text = path.read_text(encoding="utf-8")
    assert text.count("\n") <= 500, "one noun per file: split modules before 500 lines (STYLE.md)"
    for node in ast.walk(ast.parse(text)):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        assert not {n.split(".")[0] for n in names} & {"dill", "cloudpickle", "marshal"}, path
        # pickle may be written (PyTorch's memory-snapshot format, for the user's own tools), never read
        if isinstance(node, ast.ImportFrom) and node.module == "pickle":
            assert not {a.name for a in node.names} & {"load", "loads", "Unpickler"}, path
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "pickle":
            assert node.attr in ("dump", "dumps", "HIGHEST_PROTOCOL"), f"{path}: pickle.{node.attr}"


def test_shipped_front_end_code_has_no_cdn_urls():
    for path in [*PACKAGE.rglob("*.js"), *(ROOT / "labextension" / "src").rglob("*.ts")]:
        text = path.read_text(encoding="utf-8", errors="replace")
        for host in ("cdn.", "esm.sh", "unpkg.com", "jsdelivr"):
            assert host not in text, f"{path} loads code from {host}"


def test_mypy_passes_with_the_project_config(tmp_path: Path):
    """``[tool.mypy]`` in pyproject: moderate for the package, strict on the registry and state modules."""
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy-cache")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]


def test_no_module_of_the_package_is_excluded_from_mypy():
    """Every module is type-checked: no override turns errors off, nothing is excluded (issue 29)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert "exclude" not in config
    for override in config.get("overrides", []):
        assert not override.get("ignore_errors"), f"mypy ignores errors in {override['module']}"
        assert not override.get("ignore_missing_imports") or not any(
            str(m).startswith("trn_notebook") for m in override["module"]
        )


def test_package_ships_py_typed():
    assert (PACKAGE / "py.typed").is_file()
