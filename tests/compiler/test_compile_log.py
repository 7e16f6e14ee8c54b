"""The compile log owns typed live records: runs counted under its lock, frozen copies rebuilt only on change."""

from __future__ import annotations

import threading

import torch

import trn_notebook
from trn_notebook.compiler.compile_log import CompileRecord, LiveRecord, compile_log
from trn_notebook.device.placement import placement_log
from trn_notebook.facts.status import state_snapshot


def test_runs_are_counted_under_the_lock_and_unchanged_records_are_not_copied_again(fresh_compiler):
    x = torch.ones(4, device="neuron")
    f = trn_notebook.compile(lambda t: t * 2)
    g = trn_notebook.compile(lambda t: t + 2)
    f(x)
    g(x)
    live_f, live_g = compile_log.records
    assert isinstance(live_f, LiveRecord) and live_f.runs == 1
    first = compile_log.snapshot()
    assert all(isinstance(r, CompileRecord) for r in first)
    again = compile_log.snapshot()
    assert again[0] is first[0] and again[1] is first[1]  # nothing ran: the frozen copies are reused
    f(x)
    after = compile_log.snapshot()
    assert after[1] is first[1] and after[0] is not first[0]  # only the record that ran is copied again
    assert (after[0].runs, first[0].runs) == (2, 1)

    threads = [
        threading.Thread(target=lambda: [compile_log.record_run(live_g, 0.0) for _ in range(500)]) for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert compile_log.snapshot()[1].runs == 1 + 4 * 500  # no increment lost between threads


def test_status_refresh_after_set_default_device_logs_no_op(fresh_compiler):
    torch.set_default_device("neuron")
    state_snapshot(force=True)
    before = placement_log.version
    payload, changed = state_snapshot()
    assert not changed and placement_log.version == before  # reading the default device allocated nothing
    assert payload["device"] == "neuron:0"
