"""Cold compile time of the model zoo, this tree vs a baseline tree, and the zoo's compiled pass rates.

For every zoo model, a worker process compiles it cold (``torch._dynamo.reset()``, an empty compile
cache) with ``backend="neuron"`` and times the first training step (forward, loss, backward) minus a
warm step, and the first inference forward minus a warm one; it also checks both against CPU eager
(the zoo's compiled_fwd / compiled_bwd verdicts, loss and every gradient). The baseline is the same
code path in another source tree (``--baseline DIR``, e.g. ``git archive <commit> trn_notebook | tar -x
-C DIR``): workers of the two trees alternate model by model, so load drifts hit both sides alike,
and the script prints per-model and total ratios (this tree / baseline).

    python benchmarks/bench_zoo_compile.py --baseline /tmp/base [--models GLOBS] [--reps 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

_perf = time.perf_counter


def _worker() -> None:
    """Worker side: one model name per stdin line, one ``RESULT`` JSON line per model."""
    import warnings

    warnings.simplefilter("ignore")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from trn_notebook.compat.isolate import emit
    from trn_notebook.compiler.backend import clear_memory_cache
    from trn_notebook.compiler.config import override
    from trn_notebook.zoo.specs import make_inputs, spec
    from trn_notebook.zoo.stages import Runner, _loss, _to

    for line in sys.stdin.read().splitlines():
        name = line.strip()
        if not name:
            continue
        out: dict[str, object] = {
            "name": name,
            "tree": os.path.dirname(os.path.dirname(__import__("trn_notebook").__file__)),
        }
        with tempfile.TemporaryDirectory(prefix="trn-bench-zoo-") as cache, override(cache_dir=cache):
            runner = Runner(spec(name))
            for stage in ("compiled_fwd", "compiled_bwd"):  # the zoo's verdicts vs CPU
                try:
                    getattr(runner, stage)()
                    out[stage] = "pass"
                except Exception as exc:
                    out[stage] = f"fail: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
            inputs = _to(make_inputs(runner.spec, runner.cpu, labels=True), "neuron")

            def train_step(fn, inputs=inputs) -> float:
                t0 = _perf()
                _loss(fn(**inputs)).backward()
                return _perf() - t0

            def infer(fn, inputs=inputs) -> float:
                t0 = _perf()
                with torch.no_grad():
                    fn(**inputs)
                return _perf() - t0

            for key, run, train in (("train_s", train_step, True), ("infer_s", infer, False)):
                try:  # cold: the verdicts above warmed imports; no graph of theirs may be reused
                    torch._dynamo.reset()
                    clear_memory_cache()
                    model = runner.device_model().train(train)
                    compiled = torch.compile(model, backend="neuron")
                    with (
                        tempfile.TemporaryDirectory(prefix="trn-bench-cold-") as cold_dir,
                        override(cache_dir=cold_dir),
                    ):
                        cold = run(compiled)
                        warm = run(compiled)
                    out[key] = max(cold - warm, 1e-9)
                except Exception as exc:
                    out[key] = None
                    out[f"{key}_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        emit(out)


def _run(tree: str | None, names: list[str]) -> dict[str, dict]:
    from trn_notebook.compat.isolate import run_worker

    env_path = os.environ.get("PYTHONPATH", "")
    if tree:
        os.environ["PYTHONPATH"] = tree + (os.pathsep + env_path if env_path else "")
    try:
        found, died = run_worker([sys.executable, __file__, "--worker"], names, 900.0 * len(names))
    finally:
        os.environ["PYTHONPATH"] = env_path
    if died:
        print(f"  worker ({tree or 'this tree'}) died: {died}", flush=True)
    return {r["name"]: r for r in found}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--baseline", required=True, help="source tree holding the baseline trn_notebook package")
    parser.add_argument("--models", help="comma-separated globs over zoo model names (default: all)")
    parser.add_argument("--reps", type=int, default=1, help="alternating rounds per model (default 1)")
    parser.add_argument("--json", help="write the raw per-model figures here")
    args = parser.parse_args()
    from trn_notebook.zoo.specs import select

    names = [s.name for s in select(args.models)]
    print(f"load before: {os.getloadavg()}; {len(names)} models, {args.reps} round(s)", flush=True)
    rows: dict[str, dict[str, list[dict]]] = {n: {"new": [], "old": []} for n in names}
    for rep in range(args.reps):
        for i, name in enumerate(names):
            order = (
                (("old", args.baseline), ("new", None))
                if (i + rep) % 2 == 0
                else (("new", None), ("old", args.baseline))
            )
            for side, tree in order:
                got = _run(tree, [name]).get(name)
                if got:
                    rows[name][side].append(got)
            r = rows[name]
            print(f"  {name:14s} " + "  ".join(
                f"{side}: train {_fmt(_med(r[side], 'train_s'))} infer {_fmt(_med(r[side], 'infer_s'))} "
                f"fwd {_verdict(r[side], 'compiled_fwd')} bwd {_verdict(r[side], 'compiled_bwd')}"
                for side in ("old", "new")), flush=True)  # fmt: skip
    print(f"load after: {os.getloadavg()}")
    for key in ("train_s", "infer_s"):
        both = [(n, _med(rows[n]["old"], key), _med(rows[n]["new"], key)) for n in names]
        both = [(n, o, w) for n, o, w in both if o is not None and w is not None]
        if not both:
            continue
        total_old, total_new = sum(o for _, o, _ in both), sum(w for _, _, w in both)
        ratios = [w / o for _, o, w in both]
        print(f"cold compile ({key[:-2]}), {len(both)} models both sides: total old {total_old:.1f} s, new "
              f"{total_new:.1f} s, ratio {total_new / total_old:.3f}; per-model median {statistics.median(ratios):.3f} "
              f"(min {min(ratios):.3f}, max {max(ratios):.3f})")  # fmt: skip
    for stage in ("compiled_fwd", "compiled_bwd"):
        for side in ("old", "new"):
            passed = sum(1 for n in names if _verdict(rows[n][side], stage) == "pass")
            print(f"zoo {stage} ({side}): {passed}/{len(names)} pass")
    for n in names:
        for side in ("old", "new"):
            for got in rows[n][side][:1]:
                for stage in ("compiled_fwd", "compiled_bwd"):
                    if got.get(stage, "pass") != "pass":
                        print(f"  {n} {side} {stage}: {got[stage]}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=1)


def _med(runs: list[dict], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def _fmt(v: float | None) -> str:
    return "  n/a " if v is None else f"{v:5.2f}s"


def _verdict(runs: list[dict], stage: str) -> str:
    return "none" if not runs else ("pass" if runs[0].get(stage) == "pass" else "fail")


if __name__ == "__main__":
    if "--worker" in sys.argv[1:]:
        _worker()
    else:
        main()
