"""The quick zoo subset: every stage of six architectures on ``neuron`` equals CPU (the CI gate of the zoo)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("transformers")

from trn_notebook.zoo import QUICK, STAGES, select
from trn_notebook.zoo.table import rates, to_markdown

# Stages allowed to be n/a in the quick subset, with the reason they must give.
EXPECTED_NA = {
    ("bert", "generate"): "no generation head",
    ("bert", "generate_compiled"): "no generation head",
    ("vit", "generate"): "no generation head",
    ("vit", "generate_compiled"): "no generation head",
}


@pytest.fixture(scope="module")
def quick_results():
    """The quick subset, run once through the real CLI (one isolated worker per model)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = f"{tmp}/models.md"
        data = f"{tmp}/models.json"
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "trn_notebook.zoo",
                "--quick",
                "--per-worker",
                "3",
                "--jobs",
                "2",
                "--out",
                out,
                "--json",
                data,
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        with open(data, encoding="utf-8") as fh:
            results = json.load(fh)
        with open(out, encoding="utf-8") as fh:
            markdown = fh.read()
    from trn_notebook.zoo import ModelResult

    return [ModelResult.from_json(r) for r in results], markdown, proc.stdout


@pytest.mark.slow
def test_quick_zoo_every_stage_matches_cpu(quick_results):
    results, _, _ = quick_results
    assert [r.name for r in results] == list(QUICK) and len(QUICK) >= 6
    problems = []
    for r in results:
        assert not r.crashed, f"{r.name} crashed its worker: {r.crashed}"
        for stage in STAGES:
            status, detail, _ = r.stages[stage]
            expected_na = EXPECTED_NA.get((r.name, stage))
            if expected_na:
                if status != "n/a" or expected_na not in detail:
                    problems.append(f"{r.name}/{stage}: expected n/a ({expected_na}), got {status}: {detail}")
            elif status != "pass":
                problems.append(f"{r.name}/{stage}: {status}: {detail}")
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_quick_zoo_reports(quick_results):
    results, markdown, stdout = quick_results
    assert "| eager forward | 6 | 6 | 0 | 100.0% |" in markdown
    for r in results:
        assert f"| {r.name} (`{r.arch}`)" in markdown
    assert "eager forward" in stdout and "models: 6   crashes: 0" in stdout
    assert all(rate.rate == 1.0 for rate in rates(results))


def test_select_and_errors():
    assert [s.name for s in select(quick=True)] == list(QUICK)
    assert [s.name for s in select("llama,gpt*")] == ["gpt2", "llama", "gpt_neox", "gptj", "gpt_bigcode"]
    assert len(select()) >= 50
    with pytest.raises(ValueError, match="no zoo model matches"):
        select("nonesuch*")


def test_a_crashing_worker_is_a_row_not_a_crash(monkeypatch):
    """A worker that dies (here: killed by a signal) becomes a failing row naming why."""
    import trn_notebook.compat.isolate as isolate
    from trn_notebook.zoo import api

    real = isolate.run_worker

    def dying_worker(cmd, names, timeout_s):
        return real([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"], names, 60)

    monkeypatch.setattr(isolate, "run_worker", dying_worker)
    (row,) = api.run_zoo("gpt2")
    assert row.crashed.startswith("killed by signal 11")
    assert all(v[0] == "fail" and "worker crashed" in v[1] for v in row.stages.values())
    assert "**crashed: killed by signal 11" in to_markdown([row], "test")
