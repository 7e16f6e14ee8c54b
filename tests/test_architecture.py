"""The house's rules, read from the package's own imports (AST, nothing imported): no import circle, no import from
a lower floor to a higher one, and ``device/`` organised by concern (docs/ARCHITECTURE.md, "Layers"; issue 51).

Every import counts, at module level or inside a function, type-only or not: an import inside a function still
ties two modules together (it only moves *when* the tie is made).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "trn_notebook"

# Floors from the bottom up: a module may import its own floor and the floors below, never one above. A module's
# floor is that of the longest prefix listed (``trn_notebook.device.eager.dispatch`` -> ``device.eager``).
# docs/ARCHITECTURE.md draws the same table; change both together.
FLOORS: tuple[tuple[str, ...], ...] = (
    # leaves every layer may use
    ("_version", "envvars", "extras", "limits", "outfiles", "display", "aws_ratio", "workshop", "locks", "state"),
    # the device, by concern: the op table, then the shared ledgers, memory, the run_op path, the dry engine, the face
    ("device.ops", "device.chips", "device.source_lines", "device.tying"),
    ("device.config", "device.trace", "device.placement", "device.numerics"),
    ("device.costmodel", "device.clocks", "device.memory"),
    ("device.eager", "device.streams"),
    ("device.dry",),
    ("device",),  # the device's face: torch.neuron, registration, torch.accelerator routes, the autoload entry point
    ("compiler",),
    ("nki", "cache"),
    ("facts",),  # the read layer
    ("profiling",),
    ("distributed",),
    ("dry", "planner", "fidelity", "api", "numerics_compare"),
    ("migration",),
    ("session",),
    ("widgets",),
    ("magics", "quickstart"),
    ("",),  # the package's __init__: the public API
    ("demo", "compat", "zoo", "sweep_cli"),  # command-line tools built on the public API
)

# What may sit directly in device/ (outside a subpackage): the device's face and its shared ledgers.
DEVICE_TOP_LEVEL = {
    "__init__.py": "the device's public names",
    "accelerator_routes.py": "face: torch.accelerator(.memory) answers for neuron",
    "autoload.py": "face: the torch.backends entry point",
    "guard.py": "face: the Python device guard and hooks",
    "module.py": "face: torch.neuron",
    "registration.py": "face: PrivateUse1 registration and its self-test",
    "streams.py": "face: torch.neuron.Stream / Event",
    "tying.py": "face: module conversions keep Parameter identity",
    "chips.py": "ledger: the chip specifications",
    "config.py": "ledger: the device's typed configuration",
    "costmodel.py": "ledger: the roofline every charge reads",
    "clocks.py": "ledger: the three clocks and the event ring",
    "placement.py": "ledger: the placement log",
    "source_lines.py": "ledger: which line is the user's",
}


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_of(p): p for p in PACKAGE.rglob("*.py")}


def _imports(module: str, path: Path) -> set[str]:
    """The package modules ``module`` imports (a name imported from a package counts as its submodule if one)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
    return found


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}


def _floor(module: str) -> int:
    rel = module.removeprefix("trn_notebook").removeprefix(".")
    best, floor = -1, -1
    for i, names in enumerate(FLOORS):
        for name in names:
            matches = rel == name or (name != "" and rel.startswith(name + "."))
            if matches and len(name) > best:
                best, floor = len(name), i
    return floor


def _circles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    counter = 0
    for root in GRAPH:
        if root in index:
            continue
        work = [(root, iter(sorted(GRAPH[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(GRAPH[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def test_every_module_has_a_floor():
    assert not [m for m in MODULES if _floor(m) < 0], "add the module's folder to FLOORS"


def test_no_import_circle():
    assert _circles() == [], "break each circle with a leaf module (a registry, a Protocol) both sides import"


def test_no_import_runs_back_up():
    upward = sorted(
        f"{m} (floor {_floor(m)}) imports {t} (floor {_floor(t)})"
        for m, targets in GRAPH.items()
        for t in targets
        if _floor(t) > _floor(m)
    )
    assert upward == [], "a lower floor never imports a higher one: register into a leaf instead\n" + "\n".join(upward)


def test_device_is_organised_by_concern():
    top = sorted(p.name for p in (PACKAGE / "device").glob("*.py"))
    assert len(top) <= 15 and set(top) <= set(DEVICE_TOP_LEVEL), (
        f"only the device's face and shared ledgers sit in device/ itself; put the rest in a subpackage: "
        f"{sorted(set(top) - set(DEVICE_TOP_LEVEL))}"
    )
    assert not [p for p in DEVICE_TOP_LEVEL if not (PACKAGE / "device" / p).exists()], "stale DEVICE_TOP_LEVEL entry"


def test_the_rules_see_a_circle_and_an_upward_import():
    """The checks are not vacuous: a made-up circle and a made-up upward import are found."""
    GRAPH["trn_notebook.device.ops.registry"].add("trn_notebook.device.eager.dispatch")
    try:
        assert any("trn_notebook.device.ops.registry" in c for c in _circles())
        assert _floor("trn_notebook.device.eager.dispatch") > _floor("trn_notebook.device.ops.registry")
    finally:
        GRAPH["trn_notebook.device.ops.registry"].discard("trn_notebook.device.eager.dispatch")
