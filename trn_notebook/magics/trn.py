"""The ``%trn`` / ``%%trn`` magic: parse → call a ``trn_notebook.session`` function → display its result.

Library errors caused by the user's input (``ValueError`` from a chip, a bucket spec, a name) become
``UsageError``; errors raised by the user's own cell propagate so the outer cell fails.
"""

from __future__ import annotations

import argparse
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.display import display

from .. import facts, session
from ..display.results import Message, Preformatted
from ..facts import SimulatorOnlyError
from ..session.compiled import CellInputError, default_name
from ..session.device import DeviceUnavailableError
from ..session.status_card import status
from . import render
from .cells import current_cell_number, describe_source
from .parser import HelpRequested, help_text, parse
from .profile import cmd_profile, memory_snapshot
from .render import simulator_only


def _numbered_from_line_2(line: str, cell: str) -> str:
    """``cell`` behind a comment standing for the ``%%trn`` line, so its lines count as the notebook shows them.

    A body that starts with its own cell magic is left as it is (that magic must stay first).
    """
    return cell if cell.lstrip().startswith("%%") else f"# %%trn {line}\n{cell}"


@magics_class
class TrnMagics(Magics):
    """``%trn SUBCOMMAND …`` and ``%%trn eager|compile|timeit …`` (see ``%trn help``)."""

    @line_cell_magic
    def trn(self, line: str, cell: str | None = None) -> Any:
        """trn-notebook: the neuron device from Jupyter. ``%trn help`` lists the subcommands."""
        if line.split()[:1] == ["ranks"]:
            from .ranks import ranks_magic

            return ranks_magic(line, cell)
        try:
            args = parse(line, cell)
        except HelpRequested as exc:
            return Preformatted("", exc.text)
        args.line = line
        handler = getattr(self, "_cmd_" + args.command.replace("-", "_"))
        return handler(args, cell)

    _cmd_profile = cmd_profile

    # -- device and cells --------------------------------------------------------------------------
    def _cmd_device(self, args: argparse.Namespace, cell: str | None) -> Any:
        if args.target == "show":
            if any(v is not None for v in (args.chip, args.cores, args.blocking, args.fusion, args.numerics)):
                raise UsageError("%trn device: options need a device\ncorrect form: %trn device neuron --chip trn3")
            return session.device_card()
        try:
            return session.use_device(
                args.target,
                chip=args.chip,
                cores=args.cores,
                blocking=args.blocking,
                fusion=args.fusion,
                numerics=args.numerics,
            )
        except ValueError as exc:
            raise UsageError(
                f"%trn device: {exc}\ncorrect form: %trn device neuron [--chip trn2|trn3|trn1|trn1n] [--cores N] "
                "[--numerics exact|trainium[,autocast=matmult]]"
            ) from None
        except (SimulatorOnlyError, DeviceUnavailableError) as exc:
            raise UsageError(f"%trn device: {exc}") from None

    def _cmd_eager(self, args: argparse.Namespace, cell: str) -> None:
        count = current_cell_number(self.shell)
        window = session.EagerWindow(f"%%trn eager: cell [{count}]", fusion=args.fusion, strict=args.strict)
        saved = self.shell.execution_count
        self.shell.execution_count = count  # the body's lines belong to this cell, not to the next number
        try:
            with window:
                result = self.shell.run_cell(_numbered_from_line_2(args.line, cell), store_history=False)
        finally:
            self.shell.execution_count = saved
        assert window.report is not None
        window.report.failed = not result.success
        display(window.report)
        if args.as_name:
            self.shell.user_ns[args.as_name] = window.report  # the card above, as an object
        result.raise_error()

    def _cmd_dryrun(self, args: argparse.Namespace, cell: str) -> None:
        from ..dry.run import dryrun

        count = current_cell_number(self.shell)
        try:
            run = dryrun(
                f"%%trn dryrun: cell [{count}]", capacity=args.capacity, world_size=args.world_size, strict=args.strict
            )
        except ValueError as exc:
            raise UsageError(f"%%trn dryrun: {exc}") from None
        self.shell.user_ns["_trn_dryrun"] = run  # the cell can name it (run.track(model, opt), run.phase(...))
        saved = self.shell.execution_count
        self.shell.execution_count = count
        try:
            with run:
                result = self.shell.run_cell(_numbered_from_line_2(args.line, cell), store_history=False)
        except RuntimeError as exc:  # a process group already exists, a nested dry run
            raise UsageError(f"%%trn dryrun: {exc}") from None
        finally:
            self.shell.execution_count = saved
        display(run)  # the one rendering of a dry run (DryRun.parts), labelled DRY / modeled
        result.raise_error()

    def _cmd_plan(self, args: argparse.Namespace, cell: str | None) -> Any:
        from ..planner import Workload, parse_layouts, plan

        if args.model not in self.shell.user_ns:
            raise UsageError(
                f"%trn plan: {args.model!r} is not a name in the notebook; give a transformers config or a model "
                "factory\ncorrect form: %trn plan CONFIG [--layouts 'tp4,fsdp16+ac'] [--batch B] [--seq S] [--global-batch G]"
            )
        try:
            layouts = parse_layouts(args.layouts) if args.layouts else None
            return plan(
                self.shell.user_ns[args.model],
                workload=Workload(
                    batch=args.batch, seq=args.seq, global_batch=args.global_batch, master_weights=args.master_weights
                ),
                chip=args.chip,
                lnc=args.lnc,
                layouts=layouts,
                execution=args.execution,
            )
        except (ValueError, TypeError) as exc:
            raise UsageError(f"%trn plan: {exc}") from None

    def _cmd_compile(self, args: argparse.Namespace, cell: str) -> Any:
        try:
            options = session.parse_options(args.option)
        except ValueError as exc:
            raise UsageError(f"%%trn compile: {exc}") from None
        if args.buckets:
            self._check_buckets(args.buckets)
        source = self.shell.transform_cell(cell)
        # Line numbers count from the %%trn line, as the notebook shows them; the listing matches for tracebacks.
        listing = f"%%trn {args.line}\n{source}"
        filename = self.shell.compile.cache(
            listing, current_cell_number(self.shell), raw_code=f"%%trn {args.line}\n{cell}"
        )
        try:
            session.rewrite_cell(source, self.shell.user_ns, filename, first_line=2)  # refuse before any progress
        except session.CellRewriteError as exc:
            raise UsageError(f"%%trn compile: {exc}") from None
        name = args.name or default_name(source)
        progress = render.LiveProgress(name)
        try:
            report = session.compile_cell(
                source,
                self.shell.user_ns,
                fullgraph=args.fullgraph,
                name=name,
                mode=args.mode,
                options=options,
                buckets=args.buckets,
                filename=filename,
                first_line=2,
                on_progress=progress,
                describe_source=describe_source,
            )
        except CellInputError as exc:
            progress.finish(Message(f"compiling {name}: not started ({exc})", "error"))
            raise UsageError(f"%%trn compile: {exc}") from None
        except KeyboardInterrupt:
            progress.finish(Message(f"compiling {name}: interrupted; nothing was written back", "error"))
            raise
        except BaseException as exc:
            progress.finish(Message(f"compiling {name}: failed ({type(exc).__name__})", "error"))
            raise
        progress.finish(report)
        if args.as_name:
            self.shell.user_ns[args.as_name] = report  # the card above, as an object
        return report.value

    def _check_buckets(self, spec: str) -> None:
        from ..compiler import BucketPolicy

        try:
            BucketPolicy.parse(spec)
        except ValueError as exc:
            raise UsageError(
                f"%%trn compile: bad --buckets {spec!r}: {exc}\n"
                "correct form: --buckets pow2:128-2048 | step:256:256-2048 | list:128,512,2048"
            ) from None

    def _cmd_timeit(self, args: argparse.Namespace, cell: str | None) -> Any:
        shell = self.shell
        if cell is not None:
            if args.statement:
                shell.ex(shell.transform_cell(args.statement))
            statement = cell
        else:
            statement = args.statement
        source = shell.transform_cell(statement)
        code = compile(source, shell.compile.cache(source, current_cell_number(shell)), "exec")
        ns = shell.user_ns
        label = statement.strip().splitlines()[0] if statement.strip() else statement

        def run() -> None:
            exec(code, ns)

        return session.timeit(
            run, number=args.number, repeat=args.repeat, warmup=args.warmup, sync=not args.no_sync, statement=label
        )

    # -- views ----------------------------------------------------------------------------------------
    def _cmd_status(self, args: argparse.Namespace, cell: str | None) -> Any:
        return status()

    def _cmd_ops(self, args: argparse.Namespace, cell: str | None) -> Any:
        if args.table:
            try:
                return session.compatibility(ops=args.op, quick=not args.full)
            except ValueError as exc:
                raise UsageError(
                    f"%trn ops --table: {exc}\ncorrect form: %trn ops --table [--op 'add,mul'] [--full]"
                ) from None
        if args.op or args.full:
            raise UsageError("%trn ops: --op and --full go with --table\ncorrect form: %trn ops --table --op add")
        return render.render_ops(session.ops(reset=args.reset), reset=args.reset)

    def _cmd_memory(self, args: argparse.Namespace, cell: str | None) -> Any:
        if args.snapshot:
            return (
                simulator_only(
                    "%trn memory --snapshot", "torch.neuron.memory_stats(), or the Neuron profiler's memory view"
                )
                or memory_snapshot()
            )
        return render.render_memory(session.memory(reset_peak=args.reset_peak, empty_cache=args.empty_cache))

    def _cmd_cache(self, args: argparse.Namespace, cell: str | None) -> Any:
        from .. import cache as bundles

        form = "correct form: %trn cache [--clear] [--dir PATH] [--export BUNDLE] [--import BUNDLE --trust]"
        if args.export or args.import_:
            refused = simulator_only(
                "%trn cache --export/--import (trn_notebook compile-cache bundles)",
                "copy TORCH_NEURONX_NEFF_CACHE_DIR between instances that run the same versions",
            )
            if refused is not None:
                return refused
            if args.export and args.import_:
                raise UsageError(f"%trn cache: --export and --import are separate steps; give one\n{form}")
            try:
                if args.export:
                    return Message(f"exported {bundles.export(args.export)}")
                return Message(f"imported {bundles.import_(args.import_, trust=args.trust)}")
            except (ValueError, OSError) as exc:
                raise UsageError(f"%trn cache: {exc}\n{form}") from None
        if args.trust:
            raise UsageError(f"%trn cache: --trust only goes with --import BUNDLE\n{form}")
        try:
            return render.render_cache(session.cache(clear=args.clear, directory=args.dir))
        except (ValueError, OSError) as exc:
            raise UsageError(f"%trn cache: {exc}\n{form}") from None

    def _cmd_shapes(self, args: argparse.Namespace, cell: str | None) -> Any:
        refused = simulator_only(
            "%trn shapes (the simulator compiler's shape log and bucket tuner)",
            "torch._dynamo's recompile reasons (TORCH_LOGS=recompiles) show one graph per new input shape",
        )
        if refused is not None:
            return refused
        try:
            result = session.shapes(args.name)
            return render.render_shapes(result, session.views.shape_key(args.name) if args.name else None)
        except ValueError as exc:
            raise UsageError(f"%trn shapes: {exc}\ncorrect form: %trn shapes [NAME]") from None

    def _cmd_explain(self, args: argparse.Namespace, cell: str | None) -> Any:
        refused = simulator_only(
            "%trn explain (the simulator compiler's stages)",
            "TORCH_NEURONX_DEBUG_DIR=DIR + TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS=1 write every stage to DIR",
        )
        if refused is not None:
            return refused
        cells = session.compiled_cells()
        if args.name is None:
            if not cells:
                raise UsageError(
                    "%trn explain: nothing compiled yet; run a %%trn compile cell or name a compiled model"
                )
            name, last = next(reversed(cells.items()))
            target = last.fn
        elif args.name in cells:
            name, target = args.name, cells[args.name].fn
        elif args.name in self.shell.user_ns:
            name, target = args.name, self.shell.user_ns[args.name]
        else:
            known = ", ".join(cells) or "(no compiled cells yet)"
            raise UsageError(
                f"%trn explain: {args.name!r} is neither a compiled cell nor a name in the notebook; "
                f"compiled cells: {known}\ncorrect form: %trn explain [NAME] [--stage fx|aten|ir|passes|schedule]"
            )
        try:
            return session.explain(target, args.stage, title=name)
        except (ValueError, TypeError) as exc:
            raise UsageError(f"%trn explain {name}: {exc}") from None

    def _cmd_numerics(self, args: argparse.Namespace, cell: str | None) -> Any:
        from ..numerics_compare import compare_numerics

        form = "correct form: %trn numerics MODEL INPUTS [--numerics trainium,autocast=matmult] [--compiled]"
        model, inputs = (self._lookup(name, "numerics", form) for name in (args.model, args.inputs))
        generate = {"max_new_tokens": args.generate} if args.generate else None
        try:
            result = compare_numerics(
                model,
                inputs,
                numerics=args.numerics,
                compiled=args.compiled,
                threshold=args.threshold,
                generate=generate,
            )
        except (TypeError, ValueError) as exc:
            raise UsageError(f"%trn numerics: {exc}\n{form}") from None
        return render.render_numerics(result)

    def _lookup(self, name: str, command: str, form: str) -> Any:
        """``name`` (``a`` or ``a.b.c``) in the notebook's namespace; never evaluated as code."""
        head, *rest = name.split(".")
        if not head.isidentifier() or head not in self.shell.user_ns:
            raise UsageError(f"%trn {command}: {name!r} is not a name in the notebook\n{form}")
        value = self.shell.user_ns[head]
        for attr in rest:
            if not attr.isidentifier() or not hasattr(value, attr):
                raise UsageError(f"%trn {command}: {name!r}: no attribute {attr!r}\n{form}")
            value = getattr(value, attr)
        return value

    def _cmd_report(self, args: argparse.Namespace, cell: str | None) -> Any:
        return session.report()

    def _cmd_dashboard(self, args: argparse.Namespace, cell: str | None) -> Any:
        return render.render_dashboard(session.dashboard())

    def _cmd_reset(self, args: argparse.Namespace, cell: str | None) -> Any:
        from ..state import reset

        reset(compiled=not args.keep_compiled)
        kept = "compiled graphs kept in memory" if args.keep_compiled else "compiled graphs dropped from memory"
        backend = facts.current()
        if not backend.is_simulator:
            done = ", ".join(backend.reset_tracking())
            return Message(f"reset ({backend.name}): {done} cleared; {kept}")
        return Message(f"reset: placement log, clocks, memory statistics, compile and shape logs cleared; {kept}")

    def _cmd_port_check(self, args: argparse.Namespace, cell: str | None) -> Any:
        from ..migration.portcheck import PortCheckError, port_check_magic

        try:
            return port_check_magic(args.path, history=self.shell.user_ns.get("In"))
        except (PortCheckError, OSError) as exc:
            raise UsageError(f"%trn port-check: {exc}\ncorrect form: %trn port-check [PATH.ipynb|PATH.py]") from None

    def _cmd_help(self, args: argparse.Namespace, cell: str | None) -> Any:
        return Preformatted("%trn help", help_text())
