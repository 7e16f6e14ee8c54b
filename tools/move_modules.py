"""Move modules of the package with ``git mv`` and rewrite every reference to them (issue 51: the house move).

Usage: ``python tools/move_modules.py OLD=NEW [OLD=NEW ...] [--dry-run]``, dotted module names, for example
``trn_notebook.device.eager.dispatch=trn_notebook.device.eager.dispatch``. Run it from the repository root, then
``ruff check --fix . && ruff format .``.

What it rewrites, in every tracked text file:

* Python imports, found with :mod:`ast` (relative ones are resolved against the file's *old* place and written
  back relative to its *new* one; ``from pkg import moved_submodule`` becomes ``from new_pkg import name``;
  an import that names moved and unmoved submodules is split);
* dotted names anywhere else (``"trn_notebook.device.eager.dispatch.run_op"`` in ``monkeypatch`` strings, docs,
  ``pyproject.toml``, notebooks) and paths (``trn_notebook/device/eager/dispatch.py``, ``device/eager/dispatch.py``).

A new package folder gets an ``__init__.py`` holding only a placeholder docstring, to be written by hand.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path.cwd()
TEXT_SUFFIXES = {".py", ".md", ".ipynb", ".toml", ".txt", ".ts", ".js", ".sh", ".cfg", ".json", ".yml", ".yaml"}
PY_ROOTS = ("trn_notebook", "tests", "benchmarks", "tools", "examples")


def module_of(path: Path) -> str:
    """The dotted module name of a Python file under the repository root."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def file_of(module: str) -> Path:
    """The file of a dotted module name (a package's ``__init__.py`` if it is a folder)."""
    base = ROOT.joinpath(*module.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def mapped(name: str, mapping: dict[str, str]) -> str:
    """``name`` with its longest moved prefix replaced."""
    for old in sorted(mapping, key=len, reverse=True):
        if name == old or name.startswith(old + "."):
            return mapping[old] + name[len(old) :]
    return name


def resolve(level: int, module: str | None, package: str) -> str:
    """The absolute module an ``ImportFrom`` names, seen from ``package``."""
    if level == 0:
        return module or ""
    parts = package.split(".")
    base = parts[: len(parts) - level + 1]
    return ".".join(base + ([module] if module else []))


def relative(target: str, package: str) -> str:
    """``target`` written relative to ``package`` (``..ops.registry``)."""
    t, p = target.split("."), package.split(".")
    common = 0
    while common < min(len(t), len(p)) and t[common] == p[common]:
        common += 1
    level = len(p) - common + 1
    return "." * level + ".".join(t[common:])


SHADOWED: dict[str, set[str]] = {}
"""Per package, the names its ``__init__`` binds to objects: ``from .policy import policy`` makes
``trn_notebook.device.policy`` the object, not the submodule, so such a name is not a module reference."""


def shadowed_names(init: Path) -> set[str]:
    """The names a package's ``__init__.py`` binds at top level by ``from X import name`` or definitions."""
    names = set()
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.module:
            names |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def is_module_reference(name: str) -> bool:
    """False when ``name`` (dotted) reaches an object its package's ``__init__`` binds over the submodule."""
    package, _, last = name.rpartition(".")
    return last not in SHADOWED.get(package, set())


def rewrite_import(
    node: ast.Import | ast.ImportFrom, old_pkg: str, new_pkg: str, mapping: dict[str, str], moved: bool
) -> str | None:
    """The new source of one import statement, or ``None`` if it stays as it is."""
    if isinstance(node, ast.Import):
        names = [(mapped(a.name, mapping), a.asname) for a in node.names]
        if all(new == a.name for (new, _), a in zip(names, node.names, strict=True)):
            return None
        return "import " + ", ".join(n + (f" as {a}" if a else "") for n, a in names)
    base = resolve(node.level, node.module, old_pkg)
    if base.split(".")[0] not in {"trn_notebook", "tests", "benchmarks"}:
        return None
    groups: dict[str, list[str]] = {}
    for alias in node.names:
        full = f"{base}.{alias.name}"
        if full in mapping and is_module_reference(full):
            new = mapping[full]
            target, name = new.rsplit(".", 1)
        else:
            target, name = mapped(base, mapping), alias.name
        bound = alias.asname or alias.name
        groups.setdefault(target, []).append(name if name == bound else f"{name} as {bound}")
    if list(groups) == [base] and not moved:
        return None
    lines = []
    for target, names in groups.items():
        where = relative(target, new_pkg) if node.level else target
        lines.append(f"from {where} import {', '.join(names)}")
    return "\n".join(lines)


def text_patterns(mapping: dict[str, str], python: bool) -> list[tuple[re.Pattern[str], str]]:
    """Regexes for dotted names and file paths of the moved modules (in Python, not the dotted names that reach
    an object bound over the submodule: ``trn_notebook.device.policy.clear`` is the policy object's method)."""
    patterns = []
    for old in sorted(mapping, key=len, reverse=True):
        new = mapping[old]
        if not python or is_module_reference(old):
            patterns.append((re.compile(rf"(?<![\w.]){re.escape(old)}(?!\w)"), new))
        old_rel = "/".join(old.split(".")[1:])
        new_rel = "/".join(new.split(".")[1:])
        for suffix in (".py", ""):
            patterns.append(
                (
                    re.compile(rf"(?<![\w/.])trn_notebook/{re.escape(old_rel)}{suffix}(?![\w/])"),
                    f"trn_notebook/{new_rel}{suffix}",
                )
            )
            if "/" in old_rel:
                patterns.append(
                    (re.compile(rf"(?<![\w/.]){re.escape(old_rel)}{re.escape(suffix)}(?![\w/])"), f"{new_rel}{suffix}")
                )
    return patterns


def rewrite_text(text: str, patterns: list[tuple[re.Pattern[str], str]]) -> str:
    """Every pattern applied once, left to right, never to its own output."""
    combined = re.compile("|".join(f"(?:{p.pattern})" for p, _ in patterns))

    def one(match: re.Match[str]) -> str:
        for pattern, new in patterns:
            if pattern.fullmatch(match.group(0)):
                return new
        return match.group(0)

    return combined.sub(one, text)


ROLE = re.compile(r"(:(?:mod|func|class|data|meth|attr|exc|obj):`~?)(\.+)([\w.]+)`")


def rewrite_roles(text: str, old_pkg: str, new_pkg: str, mapping: dict[str, str], modules: set[str]) -> str:
    """Relative Sphinx cross-references (``:func:`~.dispatch.run_op```) resolved from the old place and written
    relative to the new one, so they still name the same object after a move."""

    def one(match: re.Match[str]) -> str:
        base = resolve(len(match.group(2)), match.group(3), old_pkg)
        parts = base.split(".")
        module = next((".".join(parts[:i]) for i in range(len(parts), 0, -1) if ".".join(parts[:i]) in modules), "")
        if not module:
            return match.group(0)
        target = mapped(module, mapping) + base[len(module) :]
        if target == base and old_pkg == new_pkg:
            return match.group(0)
        rel = relative(target, new_pkg)
        return f"{match.group(1)}{rel}`"

    return ROLE.sub(one, text)


def rewrite_python(
    text: str,
    old_module: str,
    new_module: str,
    is_init: bool,
    mapping: dict[str, str],
    patterns: list,
    modules: set[str],
) -> str:
    """A Python file's imports rewritten by AST, the rest of its text by the patterns."""
    tree = ast.parse(text)
    old_pkg = old_module if is_init else old_module.rpartition(".")[0]
    new_pkg = new_module if is_init else new_module.rpartition(".")[0]
    moved = old_module != new_module
    offsets = [0]
    for line in text.splitlines(keepends=True):
        offsets.append(offsets[-1] + len(line))
    edits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            start = offsets[node.lineno - 1] + node.col_offset
            end = offsets[node.end_lineno - 1] + node.end_col_offset  # type: ignore[operator]
            new = rewrite_import(node, old_pkg, new_pkg, mapping, moved)
            if new is not None:
                new = new.replace("\n", "\n" + " " * node.col_offset)
            edits.append((start, end, new))
    edits.sort()

    def prose(segment: str) -> str:
        return rewrite_text(rewrite_roles(segment, old_pkg, new_pkg, mapping, modules), patterns)

    out, pos = [], 0
    for start, end, new in edits:
        out.append(prose(text[pos:start]))
        out.append(text[start:end] if new is None else new)
        pos = end
    out.append(prose(text[pos:]))
    return "".join(out)


def main(argv: list[str]) -> None:
    """Move the modules named in ``argv`` and rewrite the tree; raises SystemExit on a bad argument."""
    dry = "--dry-run" in argv
    mapping = dict(a.split("=", 1) for a in argv if not a.startswith("--"))
    for old in mapping:
        if not file_of(old).exists():
            raise SystemExit(f"no module {old} ({file_of(old)})")
    tracked = subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=True).stdout.split()
    files = [ROOT / f for f in tracked if Path(f).suffix in TEXT_SUFFIXES and (ROOT / f).is_file()]
    old_to_new_path = {}
    for f in files:
        if f.suffix == ".py" and f.parts[len(ROOT.parts)] in PY_ROOTS:
            mod = module_of(f)
            new_mod = mapping.get(mod, mod)
            if new_mod != mod:
                rel = Path(*new_mod.split(".")).with_suffix(".py")
                if f.name == "__init__.py":
                    rel = Path(*new_mod.split(".")) / "__init__.py"
                old_to_new_path[f] = ROOT / rel
    for f in files:
        if f.name == "__init__.py" and f.parts[len(ROOT.parts)] in PY_ROOTS:
            SHADOWED[module_of(f)] = shadowed_names(f)
    patterns = text_patterns(mapping, python=True)
    prose_patterns = text_patterns(mapping, python=False)
    modules = {module_of(f) for f in files if f.suffix == ".py" and f.parts[len(ROOT.parts)] in PY_ROOTS}
    results = {}
    for f in files:
        text = f.read_text()
        if f.suffix == ".py" and f.parts[len(ROOT.parts)] in PY_ROOTS:
            mod = module_of(f)
            new = rewrite_python(text, mod, mapping.get(mod, mod), f.name == "__init__.py", mapping, patterns, modules)
        else:
            new = rewrite_text(text, prose_patterns)
        if new != text:
            results[f] = new
    for f, new in results.items():
        print(("would rewrite " if dry else "rewrite ") + str(f.relative_to(ROOT)))
        if not dry:
            f.write_text(new)
    for src, dst in old_to_new_path.items():
        print(("would move " if dry else "move ") + f"{src.relative_to(ROOT)} -> {dst.relative_to(ROOT)}")
        if dry:
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        for folder in [dst.parent, *dst.parent.parents]:
            if folder == ROOT or folder == ROOT / "trn_notebook":
                break
            init = folder / "__init__.py"
            if not init.exists() and init != dst:
                init.write_text(f'"""{module_of(init)}: TODO describe this folder."""\n')
                subprocess.run(["git", "add", str(init)], check=True)
        subprocess.run(["git", "mv", str(src), str(dst)], check=True)


if __name__ == "__main__":
    main(sys.argv[1:])
