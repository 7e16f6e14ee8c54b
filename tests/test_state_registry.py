"""Every module-level mutable global of the package has one owner registered with ``trn_notebook.state``.

The scan is static (AST, nothing imported): a module-level assignment of a container (dict, list, set,
deque, Counter, defaultdict, weak containers, ``threading.local``, ``itertools.count``, displays and
comprehensions) or of a class instance, and every name a function rebinds with ``global``, must be
either held by a ``state.register(...)`` call of the same module (the owner itself, or a
``state.Globals(__name__, "name", ...)``) or listed in :data:`CONSTANTS` below with why it never changes.
"""

from __future__ import annotations

import ast
import functools
import gc
import re
from pathlib import Path

import trn_notebook

PACKAGE = Path(trn_notebook.__file__).parent
CONTAINER_CALLS = {
    "dict", "list", "set", "bytearray", "deque", "defaultdict", "Counter", "OrderedDict",
    "WeakKeyDictionary", "WeakValueDictionary", "WeakSet", "local", "count",
}  # fmt: skip
GLOBAL_STATEMENT = re.compile(r"^[ \t]+global ([\w, ]+)$", re.M)
NOT_STATE_CALLS = {"Lock", "RLock", "TypeVar", "ParamSpec"}  # synchronisation and typing, hold no facts

# Module-level objects that are never mutated after import: tables of facts, lookups built once.
# Each entry says what it is; anything that changes at run time belongs to a registered owner instead.
CONSTANTS: dict[str, str] = {
    "device/trace/lanes.py:BY_KEY": "the lanes by key (built from LANES at import)",
    "device/trace/lanes.py:BY_TID": "the lanes by thread id (built from LANES at import)",
    "widgets/timeline.py:_ROW": "the widget's row of each lane (built from LANES at import)",
    "dry/ranks.py:_KIND": "c10d / functional-collective op name -> the cost model's kind",
    "device/memory/hostmem.py:_files": "memo: this process's cgroup limit files (keyed by pid; a fact of the OS, not session state)",
    "magics/ranks.py:_private_trace_dir": "memo: the session's private 0700 trace directory (kept across resets on purpose)",
    # third release (issues 25, 26, 28): fixed tables and caches derived from fixed inputs
    "device/ops/accelerator_ops.py:_DECOMPOSITIONS": "op name -> decomposition, a fixed table",
    "device/eager/storage_resize.py:META_RESIZED": "the dry engine's resize follow-up, appended once at its import",
    "display/views.py:_VIEWS": "result type -> its widget factory, registered once by each widget module at import",
    "nki/tensor.py:TILE_OPS": "tile operator -> its nl function, bound once when nki.language is imported",
    "device/dry/host_shapes.py:SPECIAL": "op -> the CPU kernel's result shapes in a dry run, a fixed table",
    "device/dry/dispatch.py:_STAND_IN": "dtype -> stand-in value of a dry value read, a fixed table",
    "device/dry/dispatch.py:_routes": "memo: an OpOverload's dispatch route, derived from the dispatcher's tables",
    "device/dry/session.py:_active": "thread-local pointer to the running dry session, owned by DrySession",
    "locks.py:_RANK": "each lock rank's position in ORDER (built from ORDER at import)",
    "locks.py:_held": "thread-local stack of the checked locks a thread holds (taken and released with them)",
    "fidelity/configs.py:BERT_LARGE": "published model dimensions",
    "fidelity/configs.py:DEEPSEEK_V3": "published model dimensions",
    "fidelity/configs.py:VIT_BASE": "published model dimensions",
    "fidelity/configs.py:LLAMA_70B": "published model dimensions",
    "fidelity/configs.py:LLAMA_8B": "published model dimensions",
    "fidelity/configs.py:MIXTRAL_8X7B": "published model dimensions",
    "fidelity/configs.py:QWEN3_32B": "published model dimensions",
    "fidelity/configs.py:QWEN35": "published model dimensions",
    "fidelity/configs.py:TRINITY_MINI": "published model dimensions",
    "fidelity/configs.py:_BUILDERS": "config name -> builder, a fixed table",
    "fidelity/configs.py:_LLAMA3": "published model dimensions",
    "fidelity/configs.py:_QWEN35": "published model dimensions",
    "fidelity/fit.py:BOUNDS": "the fitted constants' search bounds",
    "fidelity/ledger.py:_R1": "a published figure and its configuration",
    "fidelity/ledger.py:_R11": "a published figure and its configuration",
    "fidelity/ledger.py:_R11_TPOT": "published figures",
    "fidelity/ledger.py:_R11_TTFT": "published figures",
    "fidelity/ledger.py:_R12": "a published figure and its configuration",
    "fidelity/ledger.py:_R13": "a published figure and its configuration",
    "fidelity/ledger.py:_R13_STEP": "published figures",
    "fidelity/ledger.py:_R13_TTFT": "published figures",
    "fidelity/ledger.py:_R17": "a published figure and its configuration",
    "fidelity/ledger.py:_R3": "a published figure and its configuration",
    "fidelity/ledger.py:_R6": "a published figure and its configuration",
    "fidelity/ledger.py:_WALKS": "memo: shapes-only walks of fixed configs (pure function of the config)",
    "fidelity/ledger.py:PARAM_BYTES": "memo beside _WALKS: parameter bytes per config key (pure function of it)",
    "fidelity/serve.py:KNOWN": "table: the ledger's model specs by lower-case name, built at import",
    "fidelity/walk.py:_ATTENTION_OPS": "op set, a fixed table",
    "fidelity/walk.py:_MATMUL_OPS": "op set, a fixed table",
    "nki/traced.py:_OPS": "custom ops registered with torch.library (a registration survives any reset, like torch's)",
    "zoo/specs.py:_MOE": "tiny config fields, a fixed table",
    "zoo/specs.py:_S2S": "tiny config fields, a fixed table",
    "zoo/specs.py:_W2V": "tiny config fields, a fixed table",
    "facts/torchneuron.py:_STAT_KEYS": "TorchNeuron memory_stats() key names, a fixed table",
    "compat/sweep.py:DTYPE_NAMES": "dtype -> display name, a fixed table",
    "compat/table.py:COLUMNS": "the compatibility table's column names",
    "compiler/contracts.py:IMPLEMENTED_OPTIONS": "the compiler options we implement, a fixed table",
    "compiler/decompositions.py:DECOMPOSITIONS": "decomposition rules, filled by decorators at import",
    "compiler/ir.py:DTYPES": "IR dtype table",
    "compiler/ir.py:DTYPE_NAMES": "inverse of DTYPES, built at import",
    "compiler/ops.py:OPS": "IR ops built once from the op registry at import",
    "compiler/ops.py:LOWERINGS": "ATen -> IR lowerings built once from the op registry at import",
    "compiler/passes.py:_DOWNCAST": "64 -> 32-bit dtype map",
    "device/ops/autocast.py:_KEY": "the Autocast dispatch key set",
    "device/chips.py:CHIPS": "chip specifications (each figure names its source)",
    "envvars.py:_UNITS": "byte-size unit suffixes",
    "device/accelerator_routes.py:ROUTES": "the torch._C bindings routed for neuron and what answers them (fixed)",
    "fidelity/compile_rows.py:VIT_L": "ViT-L's published configuration (a compile row's model)",
    "device/ops/registry.py:AWS_CLASSES": "our categories in the words of AWS's published op classes",
    "envvars.py:VARIABLES": "the table of environment variables the package reads",
    "device/memory/runtime.py:_CPU_KEYSET": "the CPU dispatch key set",
    "distributed/backend.py:_OPS": "collective name -> c10d op table",
    "magics/parser.py:_TIMEIT_VALUED": "%trn timeit options that take a value",
    "nki/bridge.py:_TYPES": "dtype map between torch and NKI",
    "nki/costmodel.py:CORES": "NeuronCore engine figures (sourced in the module)",
    "nki/instr_common.py:_LANES": "engine -> lane table",
    "nki/kernels_tutorial.py:TUTORIAL_KERNELS": "the tutorial kernels by name",
    "nki/kernels_tutorial.py:TUTORIAL_MS": "published tutorial timings (sourced in the module)",
    "nki/kernels_tutorial.py:MAMBA_V1_MS": "published tutorial timings (sourced in the module)",
    "nki/language.py:tile_size": "read-only proxy of the current chip's tile sizes",
    "nki/ops.py:BINARY": "binary op table built at import",
    "nki/ops.py:UNARY": "unary op table built at import",
    "nki/report.py:_COLORS": "engine colours of the kernel report",
    "migration/portcheck.py:RULES": "port-check rules",
    "migration/portcheck.py:ENV_RULES": "port-check rules for environment variables",
    "migration/portcheck.py:MAGIC_RULES": "port-check rules for magics",
    "display/format.py:EXPLAIN_STAGES": "stage names of %trn explain",
    "display/format.py:COMPILE_STAGE_LABELS": "stage labels of the compile report",
    "facts/bundle.py:_TYPED": "owner name -> State field, a fixed table",
    "state.py:_registry": "not a constant: the registry of owners itself (holds every owner, never reset)",
    "display/fallback.py:CATEGORY_COLOURS": "placement category colours",
    "widgets/timeline.py:LANE_ORDER": "timeline lane order",
    "zoo/specs.py:_DEC": "model-zoo config fragments",
    "zoo/specs.py:_HEADS": "model-zoo config fragments",
    "zoo/specs.py:_GQA": "model-zoo config fragments",
    "zoo/specs.py:_ENC": "model-zoo config fragments",
    "zoo/specs.py:_VIT": "model-zoo config fragments",
    "zoo/stages.py:STAGE_TITLES": "zoo stage titles",
    "zoo/dry.py:DRY_TITLES": "dry stage titles",
    "zoo/dry.py:DRY_DIFFERENCES": "(model, stage) -> why its dry and real figures differ, a fixed table",
    "zoo/dry_table.py:_SHORT": "short names of the memory categories in the docs table",
    "zoo/stages.py:TOLERANCES": "zoo comparison tolerances (per dtype)",
    "zoo/table.py:EXPLANATIONS": "zoo table explanations",
    "zoo/table.py:_MARK": "zoo table marks",
    "__init__.py:_NUMERICS_NAMES": "public name -> numerics attribute, a fixed table",
    "compiler/numerics_pass.py:_CAST_NAMES": "auto-cast type -> rounding target name, a fixed table",
    "device/numerics/policy.py:_CAST_DTYPES": "auto-cast type -> torch dtype, a fixed table",
    "device/numerics/calls.py:_FORMATS": "float formats' mantissa bits and smallest subnormal, a fixed table",
    "device/numerics/calls.py:_NKI_NAMES": "NKI activation name -> ATen op name, a fixed table",
    "device/numerics/calls.py:_ROUND_TARGETS": "rounding target name -> torch dtype, a fixed table",
}


def _callee(call: ast.Call) -> str:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _is_mutable(value: ast.expr) -> bool:
    if isinstance(value, ast.Dict | ast.List | ast.Set | ast.DictComp | ast.ListComp | ast.SetComp):
        return True
    if isinstance(value, ast.Call):
        name = _callee(value)
        if name in NOT_STATE_CALLS:
            return False
        return name in CONTAINER_CALLS or name.lstrip("_")[:1].isupper()
    return False


def _module_statements(tree: ast.Module) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    todo = list(tree.body)
    while todo:
        node = todo.pop(0)
        out.append(node)
        if isinstance(node, ast.If | ast.Try):  # module-level conditional definitions
            todo.extend(node.body + node.orelse + getattr(node, "finalbody", []))
            for h in getattr(node, "handlers", []):
                todo.extend(h.body)
    return out


def mutable_globals(tree: ast.Module, source: str) -> set[str]:
    """Names of module-level mutable objects and of globals rebound by the module's functions."""
    found: set[str] = set()
    for node in _module_statements(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if _is_mutable(value):
            found.update(t.id for t in targets if isinstance(t, ast.Name) and t.id != "__all__")
    for names in GLOBAL_STATEMENT.findall(source):  # `global a, b` inside a function (a text scan: ast.walk is slow)
        found.update(n.strip() for n in names.split(","))
    return found


def registered_globals(tree: ast.Module, *also: str) -> set[str]:
    """Names this module hands to ``state.register``: the owner object itself or a ``Globals``'s names
    (``also``: other spellings of the module's name, as a module below ``state`` is registered by ``state``)."""
    held: set[str] = set()
    for node in _module_statements(tree):
        call = node.value if isinstance(node, ast.Expr) else None
        if not isinstance(call, ast.Call) or _callee(call) != "register" or len(call.args) < 2:
            continue
        owner = call.args[1]
        if isinstance(owner, ast.Name):
            held.add(owner.id)
        elif isinstance(owner, ast.Call) and owner.args and ast.unparse(owner.args[0]) in ("__name__", *also):
            # state.Globals(__name__, "a", "b") or a subclass of it
            held.update(a.value for a in owner.args[1:] if isinstance(a, ast.Constant) and isinstance(a.value, str))
    return held


@functools.cache
def _scan() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    found: dict[str, set[str]] = {}
    held: dict[str, set[str]] = {}
    gc.disable()  # ASTs are many small objects: collections would walk torch's whole heap again and again
    try:
        _scan_into(found, held)
    finally:
        gc.enable()
    return found, held


def _scan_into(found: dict[str, set[str]], held: dict[str, set[str]]) -> None:
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
        found[rel] = mutable_globals(tree, source)
        held[rel] = registered_globals(tree)
    # trn_notebook/envvars.py is below state (locks read a variable through it): state.py registers it
    held["envvars.py"] = registered_globals(ast.parse((PACKAGE / "state.py").read_text()), "_envvars.__name__")


def test_every_mutable_global_is_registered_or_a_listed_constant():
    found, held = _scan()
    unowned = sorted(
        f"trn_notebook/{rel}:{name}"
        for rel, names in found.items()
        for name in names - held[rel]
        if f"{rel}:{name}" not in CONSTANTS
    )
    assert not unowned, (
        "module-level mutable state without an owner: register it with trn_notebook.state "
        "(state.register(name, owner_or_state.Globals(__name__, ...), reset=...)) or, if it never changes "
        f"after import, list it in CONSTANTS with why: {unowned}"
    )


def test_the_constant_list_has_no_stale_entries():
    found, held = _scan()
    stale = [key for key in CONSTANTS if key.split(":")[1] not in found.get(key.split(":")[0], set())]
    assert not stale, f"CONSTANTS lists names that are no longer module-level mutable objects: {stale}"
    double = [key for key in CONSTANTS if key.split(":")[1] in held.get(key.split(":")[0], set())]
    assert not double, f"registered and listed as constants: {double}"


def test_the_scan_sees_what_it_must(tmp_path):
    src = (
        "import threading\nfrom collections import defaultdict\n"
        "_a = {}\n_b: list[int] = []\n_c = defaultdict(int)\n_d = Thing()\n_e = threading.local()\n"
        "_lock = threading.Lock()\n_n = 0\n_t = (1, 2)\n__all__ = ['x']\n"
        "def f():\n    global _n\n    _n += 1\n"
        "_state.register('a', _state.Globals(__name__, '_a', '_n'))\n_state.register('d', _d)\n"
    )
    tree = ast.parse(src)
    assert mutable_globals(tree, src) == {"_a", "_b", "_c", "_d", "_e", "_n"}
    assert registered_globals(tree) == {"_a", "_n", "_d"}
