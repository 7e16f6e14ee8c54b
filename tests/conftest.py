"""Shared fixtures: every test starts from :func:`trn_notebook.state.reset` (the public reset)."""

from __future__ import annotations

import gc
import os

# Every lock of the package checks the documented order as it is taken (trn_notebook/locks.py): a lock taken
# against it raises LockOrderError naming both locks instead of deadlocking. Set before torch is imported
# (importing torch loads trn_notebook through its torch.backends entry point); notebook kernels inherit it.
os.environ.setdefault("TRN_NOTEBOOK_LOCK_CHECK", "1")

# Under pytest-xdist (the default, below) the workers share the cores: each worker's torch — and every kernel,
# rank and subprocess it starts, which inherit the environment — gets its share of threads. Without this, OpenMP
# threads of two workers spin against each other: a notebook's timed matmuls ran 8x slower in one cell than in
# the next (07's wall-clock check failed at 143 vs 19 ms). Set before torch is imported, which reads them.
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
_WORKER_COUNT = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
if _WORKER_COUNT > 1:
    for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_name, str(max(1, CORES // _WORKER_COUNT)))

import pytest  # noqa: E402 - after the environment above
import torch  # noqa: E402 - after the environment above

import trn_notebook  # noqa: E402, F401 - registers the neuron device
from trn_notebook import state  # noqa: E402 - after the environment above
from trn_notebook.device.memory.runtime import allocator, set_memory_capacity  # noqa: E402 - after the environment above


@pytest.fixture
def fresh_device():
    """Reset placement log, clocks and memory statistics; restore the memory capacity and default device."""
    gc.collect()
    state.reset(compiled=False)
    capacity = allocator.snapshot().capacity
    default_device = torch.get_default_device()
    yield
    set_memory_capacity(capacity)
    torch.set_default_device(default_device)


@pytest.fixture
def fresh_compiler(tmp_path, fresh_device):
    """Own compile-cache dir, empty compile/shape logs, no compiled graphs or frames left from other tests."""
    from trn_notebook.compiler.config import override

    state.reset()
    with override(cache_dir=str(tmp_path / "cache")):
        yield
    torch._dynamo.reset()


@pytest.fixture(autouse=True)
def _no_leaked_torch_globals():
    """Every test starts on CPU with float32 defaults, whatever the previous test changed."""
    yield
    torch.set_default_device(None)
    torch.set_default_dtype(torch.float32)
    torch.__future__.set_overwrite_module_params_on_conversion(False)


# --- the suite on every core (issue 49: 12 minutes on 2 cores) ----------------------------------------------------
# pyproject's addopts run it under pytest-xdist, `-n auto --dist loadfile`: a test file runs in order on one
# worker, its module fixtures (a JupyterLab server, a kernel, the zoo's quick run) set up once. (`--dist
# loadgroup` would spread a file's tests but silently groups nothing with pytest 9.2: pytest-xdist#1386.) A long
# file is split in two instead (tests/notebooks/test_repeat_runs*.py). `-n 0` runs the suite in this process.
MAX_WORKERS = 4  # notebook and browser tests start kernels and servers of their own: more workers oversubscribe


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Workers for ``-n auto``: one per core, at most :data:`MAX_WORKERS`."""
    return max(1, min(MAX_WORKERS, CORES))


# --- what did not run (issue 49 item 4) ------------------------------------------------------------------------
_skipped: list[pytest.TestReport] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        _skipped.append(report)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    from tests.skip_groups import summary_lines

    lines = summary_lines(_skipped)
    if lines:
        terminalreporter.section("what did not run", sep="-")
        for line in lines:
            terminalreporter.line(line)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    from tests.skip_groups import browser_required, skip_group

    browser_skips = [r for r in _skipped if skip_group(r) == "browser"]
    if browser_required() and browser_skips:
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None:
            tr.write_line(
                f"FAILED: {len(browser_skips)} browser tests skipped although chromium is installed "
                f"(TRN_NOTEBOOK_REQUIRE_BROWSER=1), first: {browser_skips[0].nodeid}",
                red=True,
            )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
