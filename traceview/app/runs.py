"""The commands over a whole run (several rank files): find the files and ranks, summarise
every rank on an engine, merge, analyse, render. The CLI calls these."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from traceview.app.commands import _command, _warn, check_save, show
from traceview.choices import DocumentFormat, check_choice
from traceview.errors import UsageError
from traceview.options import ENGINES, ReadOptions, RunOptions, inputs_of

if TYPE_CHECKING:
    from traceview.analyses.diff import DiffOptions
    from traceview.analyses.gaps import GapOptions
    from traceview.analyses.kernels import KernelOptions
    from traceview.analyses.runs.diff import RunSide
    from traceview.analyses.runs.rank_summary import RankSummary
    from traceview.analyses.runs.snapshot import RunSnapshot
    from traceview.app.commands import OutputOptions
    from traceview.app.engines.worker import RunResult
    from traceview.render.html.documents import ReportOptions


def is_run(inputs: Sequence[Path], run: RunOptions) -> bool:
    """Whether the inputs are a run (several files, a directory or a glob) rather than one
    trace file read the usual way."""
    return (
        len(inputs) > 1
        or run.glob is not None
        or any(p.is_dir() for p in inputs)
        or (not inputs[0].exists() and any(c in str(inputs[0]) for c in "*?["))
    )


def check_options(run: RunOptions) -> None:
    """Usage errors before any reading."""
    if run.engine not in ENGINES:
        raise UsageError(f"--engine {run.engine!r}: expected one of {', '.join(ENGINES)}")
    if run.jobs is not None and run.jobs < 1:
        raise UsageError(f"-j {run.jobs}: expected a number of processes ≥ 1")
    if run.engine != "dask" and (run.scheduler or run.scheduler_file):
        raise UsageError("--scheduler and --scheduler-file need --engine dask")
    if run.scheduler and run.scheduler_file:
        raise UsageError("give one of --scheduler and --scheduler-file (both name the scheduler)")


def run_inputs(inputs: Sequence[Path], run: RunOptions) -> tuple[Path, ...]:
    """The trace files the inputs name and the side files of ``run``: what an output file
    must never be, --force or not (known before any reading)."""
    from traceview.read.discover import run_files

    check_options(run)
    return inputs_of(run_files(list(inputs), run.glob), run)


def gather(
    inputs: Sequence[Path],
    run: RunOptions,
    read: ReadOptions,
    kernels: KernelOptions,
    report: bool = False,
    snapshot: bool = False,
) -> RunResult:
    """Find the run's files and ranks, summarise every rank, merge."""
    from traceview.app.engines.worker import RankTask
    from traceview.read.discover import assign_ranks, compile_rank_regex, run_files

    check_options(run)
    regex = compile_rank_regex(run.rank_regex)
    files = assign_ranks(run_files(list(inputs), run.glob), regex)
    by_order = [f for f in files if f.source == "order"]
    if by_order:
        _warn(
            "no rank in the header or the file name of "
            + ", ".join(f"{f.path} (rank {f.rank} by file order)" for f in by_order)
        )
    # Workers stay quiet: one progress bar per rank would be noise.
    quiet = ReadOptions(**{**read.__dict__, "quiet": True})
    tasks = [RankTask(f.rank, f.path, quiet, kernels, report, snapshot) for f in files]
    if run.engine == "dask":
        from traceview.app.engines import dask

        result = dask.run(tasks, run, read.partial)
    else:
        from traceview.app.engines import local

        result = local.run(tasks, run, read.partial)
    for summary in result.summaries:  # what reading met, said here whatever the engine
        for warning in summary.warnings:
            _warn(warning)
    return result


def _warn_run(warnings: Sequence[str], result: RunResult) -> None:
    """The run's own warnings (gather said the ranks')."""
    said = {w for s in result.summaries for w in s.warnings}
    for warning in warnings:
        if warning not in said:
            _warn(warning)


def ranks(inputs: Sequence[Path], run: RunOptions, read: ReadOptions, out: OutputOptions) -> None:
    """``traceview ranks``."""
    from traceview.analyses.kernels import KernelOptions
    from traceview.analyses.runs.ranks import ranks_report
    from traceview.render.runs import ranks as render_ranks

    files = run_inputs(inputs, run)
    check_save(out, files)
    result = gather(inputs, run, read, KernelOptions())
    report = ranks_report(result.summaries, result.rollup, result.waits)
    _warn_run(report.warnings, result)
    show(out, render_ranks.document(report), files)


@_command  # the shown rank's entry, written in the background: ended with the command
def report(
    inputs: Sequence[Path],
    run: RunOptions,
    read: ReadOptions,
    options: ReportOptions,
    output: Path,
    force: bool,
) -> None:
    """``traceview report`` of a run: the ranks section from the run's ``ranks`` document, the
    other sections from one rank's trace (``--rank``, default the lowest rank)."""
    from dataclasses import replace

    from traceview.analyses.kernels import KernelOptions
    from traceview.analyses.runs.ranks import ranks_report
    from traceview.app.commands import write_page
    from traceview.app.memory import reuse_freed_memory
    from traceview.app.reading import read_trace
    from traceview.render.html.documents import collect
    from traceview.render.html.page import plotly_path
    from traceview.render.output import check_output_path

    files = run_inputs(inputs, run)
    check_output_path(output, force, files)
    plotly_path()  # the missing extra is said before any reading
    result = gather(inputs, run, read, KernelOptions())
    ranks = ranks_report(result.summaries, result.rollup, result.waits)
    _warn_run(ranks.warnings, result)
    shown = _shown_rank(result.summaries, options.rank)
    reuse_freed_memory()
    events = read_trace(Path(shown.path), read, keep_cpu=True, remember=False)
    docs = replace(collect(events, options), ranks=ranks.as_json(), rank=shown.rank)
    write_page(docs, output, force, files)


def _shown_rank(summaries: Sequence[RankSummary], wanted: int | None) -> RankSummary:
    """The rank whose trace the report's sections show: ``wanted``, else the lowest."""
    from traceview.analyses.core.steps import compress

    if wanted is None:
        return min(summaries, key=lambda s: s.rank)
    for summary in summaries:
        if summary.rank == wanted:
            return summary
    have = compress(sorted(s.rank for s in summaries))
    raise UsageError(f"--rank {wanted}: no such rank in this run (ranks: {have})")


def kernels(
    inputs: Sequence[Path],
    run: RunOptions,
    options: KernelOptions,
    read: ReadOptions,
    out: OutputOptions,
) -> None:
    """``traceview kernels`` over several ranks: the roll-up, then per rank on request."""
    from traceview.analyses.runs.kernels import check_options, rollup_report
    from traceview.render.runs import kernels as render

    check_options(options)
    if out.output is not None:
        raise UsageError("-o: the detailed report is for one trace; use --format json > FILE")
    result = gather(inputs, run, read, options, report=run.per_rank)
    report = rollup_report(result.summaries, result.rollup, options)
    show(out, render.document(report, out.verbose))


def steps(
    inputs: Sequence[Path], run: RunOptions, read: ReadOptions, out: OutputOptions, top: int
) -> None:
    """``traceview steps`` over several ranks: the roll-up, then per rank on request; ``top``:
    steps in each table (0: all)."""
    from traceview.analyses.kernels import KernelOptions
    from traceview.analyses.runs.steps import step_rollup
    from traceview.render.runs import steps as render

    files = run_inputs(inputs, run)
    check_save(out, files)
    result = gather(inputs, run, read, KernelOptions(), report=run.per_rank)
    report = step_rollup(result.summaries, result.rollup)
    show(out, render.document(report, top), files)


def gaps(
    inputs: Sequence[Path],
    run: RunOptions,
    options: GapOptions,
    read: ReadOptions,
    out: OutputOptions,
) -> None:
    """``traceview gaps`` over several ranks: per rank and over the run (device gaps of every
    GPU activity; the selection and report options are for one trace)."""
    from dataclasses import replace

    from traceview.analyses.gaps import GapOptions
    from traceview.analyses.kernels import KernelOptions
    from traceview.analyses.runs.gaps import gap_rollup
    from traceview.render.runs import gaps as render

    if replace(options, context=True) != GapOptions():
        raise UsageError(
            "gaps over several ranks takes no gap options (only --format and the read and "
            "run options); give one rank's trace for --min-gap, --stream, --per-stream, ..."
        )
    if out.output is not None:
        raise UsageError("--gap-output: the detailed report is for one trace")
    result = gather(inputs, run, read, KernelOptions())
    report = gap_rollup(result.summaries, result.rollup)
    show(out, render.document(report))


def snapshot(
    inputs: Sequence[Path], run: RunOptions, read: ReadOptions, output: Path | None, force: bool
) -> None:
    """``traceview snapshot`` of a run: the roll-up and every rank's snapshot as one JSON
    document, to stdout or atomically to ``output``."""
    from traceview.analyses.kernels import KernelOptions
    from traceview.app.run_snapshot_file import to_json
    from traceview.render.output import check_output_path, write_file, write_stdout

    files = run_inputs(inputs, run)
    if output is not None:
        check_output_path(output, force, files)
    text = to_json(run_snapshot(inputs, run, read, KernelOptions()))
    if output is None:
        write_stdout(text, json=True)
    else:
        write_file(output, text, force, files, quiet=read.quiet)


def run_snapshot(
    inputs: Sequence[Path], run: RunOptions, read: ReadOptions, kernels: KernelOptions
) -> RunSnapshot:
    """The snapshot of the run the inputs make (each rank's built in its worker)."""
    from traceview.analyses.runs.snapshot import build_run_snapshot

    result = gather(inputs, run, read, kernels, snapshot=True)
    return build_run_snapshot(result.summaries, result.rollup)


def is_run_side(path: Path, run: RunOptions) -> bool:
    """Whether a ``diff`` input is a run: a run snapshot, a directory or a glob."""
    from traceview.app.run_snapshot_file import is_run_snapshot

    return is_run([path], run) or is_run_snapshot(path)


def diff(
    base: Path,
    new: Path,
    run: RunOptions,
    options: DiffOptions,
    read: ReadOptions,
    out: OutputOptions,
) -> None:
    """``traceview diff`` of two runs: the roll-ups, and each rank with ``--per-rank``; a
    failed gate raises (exit 1) after the report."""
    from traceview.analyses.runs.diff import check_run_options, compare_runs
    from traceview.errors import TraceviewError
    from traceview.render.runs import diff as render

    check_choice("--format", out.format, DocumentFormat)
    check_run_options(options)
    for side, other in ((base, new), (new, base)):
        if not is_run_side(side, run):
            raise UsageError(
                f"{side} is one trace and {other} a run: compare a run with a run (a directory, "
                "a glob or a run snapshot), or one rank's trace with another"
            )
    files = run_inputs([base, new], run)  # a run snapshot is its own file
    check_save(out, files)
    report = compare_runs(
        _run_side(base, run, read), _run_side(new, run, read), options, run.per_rank
    )
    show(out, render.document(report, out.verbose), files)
    if not report.passed:
        raise TraceviewError(render.failure_message(report, out.verbose))


def _run_side(path: Path, run: RunOptions, read: ReadOptions) -> RunSide:
    """A run diff input: a run snapshot (recognised by its content) or a run, read here."""
    from traceview.analyses.kernels import KernelOptions
    from traceview.analyses.runs.diff import RunSide
    from traceview.app.run_snapshot_file import is_run_snapshot, load_run_snapshot

    if is_run_snapshot(path):
        return RunSide(str(path), "run snapshot", load_run_snapshot(path))
    return RunSide(str(path), "run", run_snapshot([path], run, read, KernelOptions()))


def memory(
    inputs: Sequence[Path], run: RunOptions, read: ReadOptions, out: OutputOptions, top: int
) -> None:
    """``traceview memory`` over several ranks: each rank read in turn (from its cache entry
    when it has one), one at a time in memory."""
    from traceview.analyses.core.trace import summarize
    from traceview.analyses.memory import analyse_memory
    from traceview.app.reading import read_trace, wait_for_cache_writes
    from traceview.read.discover import assign_ranks, compile_rank_regex
    from traceview.render.runs import memory as render

    files = run_inputs(inputs, run)
    check_save(out, files)
    ranked = assign_ranks(list(files), compile_rank_regex(run.rank_regex))
    results, size = [], 0
    for f in ranked:
        events = read_trace(f.path, read, keep_cpu=True, memory=True)
        results.append((f.rank, summarize(events, memory=True), analyse_memory(events)))
        size += events.size_bytes
        wait_for_cache_writes()  # its entry, written in the background, before the next read
        del events
    show(out, render.document(results, size, top, run.per_rank), files)
