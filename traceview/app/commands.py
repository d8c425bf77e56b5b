"""One function per command: read the trace, analyse, render, write. The CLI calls these."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from traceview.app.reading import read_trace, wait_for_cache_writes
from traceview.choices import DiffFormat, DocumentFormat, Format, check_choice
from traceview.errors import USAGE_ERROR, TraceviewError, UsageError
from traceview.options import ReadOptions, inputs_of
from traceview.render.output import (
    check_output_path,
    stderr_console,
    stdout_is_terminal,
    write_file,
    write_stdout,
)

# Each command imports its own analysis and renderer: a warm run is mostly start-up, and
# python -X importtime gives 0.07 s for diff+snapshot, 0.03 s for rich, 0.05 s for pyarrow.
if TYPE_CHECKING:
    from rich.console import Console

    from traceview.analyses.audit import Figure
    from traceview.analyses.diff import DiffOptions, DiffReport, Side
    from traceview.analyses.energy import EnergyReport, PowerOptions
    from traceview.analyses.gaps import GapOptions
    from traceview.analyses.kernels import KernelOptions
    from traceview.analyses.ops.view import OpOptions
    from traceview.app.trim import TrimOptions
    from traceview.cache.manage import Removal
    from traceview.columns.model import TraceEvents
    from traceview.render.document import Document
    from traceview.render.html.documents import Documents, ReportOptions

    Trust = dict[str, Figure]  # a trace's verdicts, by headline figure

_P = ParamSpec("_P")
_R = TypeVar("_R")


@dataclass(frozen=True)
class OutputOptions:
    """How to show the result."""

    format: str = "table"
    verbose: bool = False
    output: Path | None = None
    force: bool = False
    wide: bool = False  # a terminal table shows every column, however wide
    # -o of steps, summary, diff, energy and ranks: the output, in the chosen format (table:
    # plain text), written to this file instead of stdout (kernels' and gaps' -o is ``output``,
    # a detailed report written besides).
    save: Path | None = None


def _command(run: Callable[_P, _R]) -> Callable[_P, _R]:
    """A command that reads traces: it ends once the cache entries it started are written."""

    @functools.wraps(run)
    def command(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return run(*args, **kwargs)
        finally:
            wait_for_cache_writes()

    return command


@_command
def kernels(
    path: Path,
    options: KernelOptions,
    read: ReadOptions,
    out: OutputOptions,
    phase: str | None = None,
) -> None:
    """``traceview kernels``; ``phase``: only the GPU work of that phase's steps."""
    from traceview.analyses.kernels import analyse_kernels, check_options
    from traceview.render import kernels as render_kernels

    check_options(options)  # before reading a trace that may take minutes
    _check_output(out, path)
    keep_cpu = options.group_by in ("category", "fused-op", "op")
    uses_steps = bool(options.steps or phase)
    # The launch times place a row in its step and link ops: by name, without steps, unread.
    lean = not (keep_cpu or uses_steps or read.step_regex is not None)
    unused = _unused(launch_times=lean)
    events = read_trace(path, read, keep_cpu, phases=bool(phase), steps=uses_steps, unused=unused)
    events = _of_phase(events, phase)
    if _nothing_to_show(events, out):
        return
    # every row (--top 0) made as it is written: there may be 10^6
    report = analyse_kernels(events, options, streamed=options.top == 0)
    # Files hold every row whatever --top says: CSV and the -o report.
    wants_all = options.top != 0 and (out.format == "csv" or out.output is not None)
    every = report
    if wants_all:
        every = analyse_kernels(events, replace(options, top=0), streamed=True)
    if options.name_regex is not None and report.count == 0:
        _warn(f"--name {options.name_regex!r} matches no kernel of this trace")
    show(out, render_kernels.document(report, out.verbose, every))
    if out.output is not None:
        write_file(out.output, render_kernels.detailed_report(every), out.force, (path,))


@_command
def steps(
    path: Path, read: ReadOptions, out: OutputOptions, top: int, peaks: Path | None = None
) -> None:
    """``traceview steps``; ``top``: steps in the table (0: all; JSON and CSV hold all);
    ``peaks``: a ``--peaks`` file for MFU."""
    from traceview.analyses.core.devices import launch_times
    from traceview.analyses.core.step_markers import PhaseEvidence, step_phases
    from traceview.analyses.core.steps import step_table
    from traceview.analyses.core.trace import summarize
    from traceview.analyses.ops.model_flops import Known, linked, steps_model_flops
    from traceview.analyses.ops.peaks import load_peaks_file
    from traceview.render import steps as render_steps

    _check_format(out.format)
    check_save(out, (path,))
    if peaks is not None:
        load_peaks_file(peaks)  # a wrong file is said before the trace is read
    events = read_trace(path, read, keep_cpu=True, unused=_unused())
    trace = summarize(events)  # first: its temporaries beside the columns alone
    # the steps' phases from the pass over the CPU rows that links the ops (one pass saved)
    evidence = PhaseEvidence(events)
    found = linked(events, evidence.add)
    events = step_phases(events, evidence)
    # of the links, only the rows' known FLOPs and launch times are kept (9 B a row, not 25)
    first = found.links.launch
    known = Known.of(events, found)
    del found
    launch = launch_times(events, first)
    del first
    rows = step_table(events, launch=launch)
    flops = steps_model_flops(events, rows, peaks, known, launch)
    del known, launch
    show(out, render_steps.document(trace, rows, top, flops), (path,))


@_command
def gaps(
    path: Path,
    options: GapOptions,
    read: ReadOptions,
    out: OutputOptions,
    phase: str | None = None,
) -> None:
    """``traceview gaps``; ``phase``: only the GPU work of that phase's steps."""
    from traceview.analyses.gaps import analyse_gaps, check_options
    from traceview.render import gaps as render_gaps

    check_options(options)  # before reading a trace that may take minutes
    _check_output(out, path)
    uses_steps = bool(options.steps or phase)
    events = _of_phase(
        read_trace(
            path, read, options.context, phases=bool(phase), steps=uses_steps, unused=_unused()
        ),
        phase,
    )
    if _nothing_to_show(events, out):
        return
    # every transition (--gap-top 0) made as it is written: there may be 10^6
    report = analyse_gaps(events, options, streamed=options.top == 0)
    show(out, render_gaps.document(report, out.verbose))
    if out.output is not None:
        full = analyse_gaps(events, replace(options, top=0, stream_top=0), streamed=True)
        write_file(out.output, render_gaps.detailed_report(full), out.force, (path,))


@_command
def ops(
    path: Path, options: OpOptions, read: ReadOptions, out: OutputOptions, phase: str | None = None
) -> None:
    """``traceview ops``; ``phase``: only the kernels of that phase's steps."""
    from traceview.analyses.ops.view import analyse_ops, check_options
    from traceview.render import ops as render_ops

    _check_format(out.format)
    check_options(options)
    inputs = inputs_of((path,), options)
    check_save(out, inputs)
    events = _of_phase(
        read_trace(path, read, keep_cpu=True, phases=bool(phase), unused=_unused()), phase
    )
    if _nothing_to_show(events, out):
        return
    # The CSV holds every op whatever --top says.
    wants_all = options.top != 0 and out.format == "csv"
    if wants_all:
        report = analyse_ops(events, options)
        every = analyse_ops(events, replace(options, top=0))
    else:  # handed over: analyse_ops lets go of the runtime calls once linked
        held = [events]
        del events
        report = every = analyse_ops(held.pop(), options)
    show(out, render_ops.document(report, every), inputs)


@_command
def summary(
    path: Path,
    read: ReadOptions,
    out: OutputOptions,
    phase: str | None = None,
    include_warmup: bool = False,
    peaks: Path | None = None,
) -> None:
    """``traceview summary``; ``phase``: only the GPU work of that phase's steps;
    ``include_warmup``: warm-up and capture steps counted in the step medians; ``peaks``:
    a ``--peaks`` file for MFU."""
    from traceview.analyses.core.stall import STALL_FRAME_MIN_NS
    from traceview.analyses.ops.peaks import load_peaks_file
    from traceview.analyses.summary import overview
    from traceview.app.aside import aside_for
    from traceview.app.memory import reuse_freed_memory
    from traceview.render import summary as render_overview

    check_choice("--format", out.format, DocumentFormat)
    check_save(out, (path,))
    if peaks is not None:
        load_peaks_file(peaks)  # a wrong file is said before the trace is read
    # the phases: for --phase at once, else from overview's pass over the CPU rows
    chosen = phase is not None
    whole = read_trace(
        path,
        read,
        keep_cpu=True,
        phases=chosen,
        memory=True,
        frames=True,
        unused=_unused(flows=True),
        frames_from_ns=STALL_FRAME_MIN_NS,  # the host-stall hint looks at no shorter frame
    )
    reuse_freed_memory()  # the analyses' many row-sized temporaries: no page faults anew
    events = _of_phase(whole, phase)
    if _nothing_to_show(events, out):
        return
    trust = None
    if phase is not None:  # the verdicts are the whole trace's (analyses.summary.overview)
        from traceview.analyses.audit import audit

        trust = audit(whole, mfu=True).figures  # MFU's kept where the phase has a value
    aside = aside_for(events)
    held = [events]  # handed over: overview lets go of the runtime calls once done with them
    del whole, events
    report = overview(
        held.pop(),
        include_warmup=include_warmup,
        peaks_file=peaks,
        trust=trust,
        phases_here=not chosen,
        aside=aside,
    )
    show(out, render_overview.document(report), (path,))


@_command
def audit(path: Path, read: ReadOptions, out: OutputOptions) -> int:
    """``traceview audit``: the checks and verdicts; the exit code (0 sound, 1 a headline
    figure untrusted). An error exits 2 here: 1 means untrusted."""
    from traceview.analyses.audit import audit as audit_trace
    from traceview.analyses.ops.model_flops import has_mfu
    from traceview.render import audit as render_audit

    try:
        _check_format(out.format)
        check_save(out, (path,))
        # a file cut short is a finding here (truncated), not an error: read what it holds
        events = read_trace(
            path, replace(read, partial=True), keep_cpu=True, phases=True, unused=_unused()
        )
    except TraceviewError as e:
        raise TraceviewError(e.message, USAGE_ERROR) from None
    report = audit_trace(events, mfu=has_mfu(events))
    show(out, render_audit.document(report), (path,))
    return 1 if report.untrusted else 0


@_command
def memory(path: Path, read: ReadOptions, out: OutputOptions, top: int) -> None:
    """``traceview memory``: the allocator's peaks and who holds memory at them."""
    from traceview.analyses.core.trace import summarize
    from traceview.analyses.memory import NO_EVENTS, analyse_memory
    from traceview.render import memory as render_memory

    _check_format(out.format)
    check_save(out, (path,))
    events = read_trace(path, read, keep_cpu=True, memory=True, unused=_unused(launch_times=True))
    report = analyse_memory(events)
    if report.events == 0 and out.format == "table":
        _one_line(out, f"{events.path}: {NO_EVENTS}", (path,))
        return
    show(out, render_memory.document(summarize(events, memory=True), report, top), (path,))


def _unused(launch_times: bool = False, flows: bool = False) -> frozenset[str]:
    """The columns a command leaves out of its read (traceview.columns.schema.DROPPABLE): the
    launch configurations, which ``unique`` alone reads, and the frames' Python ids, which
    ``source`` alone reads; the launch times if ``launch_times``; the fwdbwd flows of a read
    with frames if ``flows``."""
    from traceview.columns.schema import FLOWS, FRAME_PARENTS, GPU_LAUNCH, RUNTIME_TS

    unused = {GPU_LAUNCH, RUNTIME_TS} if launch_times else {GPU_LAUNCH}
    return frozenset(unused | FRAME_PARENTS | (FLOWS if flows else set()))


def _of_phase(events: TraceEvents, phase: str | None) -> TraceEvents:
    """``--phase``: the events of that phase's steps (all without it)."""
    if phase is None:
        return events
    from traceview.analyses.core.step_markers import in_phase

    return in_phase(events, phase)


def one_trace_only(flag: str, value: object) -> None:
    """A usage error when ``flag`` was given to a run of several traces."""
    if value is not None:
        raise UsageError(f"{flag}: takes one trace, not a run of several")


def _nothing_to_show(events: TraceEvents, out: OutputOptions) -> bool:
    """A trace without GPU activity gets one line instead of empty tables (JSON, CSV and
    Markdown keep their shape, empty)."""
    if len(events.gpu.ts) or out.format != "table":
        return False
    if len(events.runtime.ts):
        why = "runtime calls but no GPU activity recorded (was CUDA activity collected?)"
    else:
        why = "no GPU kernels recorded: was the profiler run with ProfilerActivity.CUDA?"
    _one_line(out, f"{events.path}: {why}", (Path(events.path),))
    return True


def _one_line(out: OutputOptions, line: str, inputs: Sequence[Path]) -> None:
    """A table that is one line (nothing to show): where the table would go, the ``-o`` file
    as for every format, else stdout."""
    from traceview.render.escape import text_lines

    text = text_lines([line]) + "\n"
    if out.save is not None:
        write_file(out.save, text, out.force, inputs)
    else:
        write_stdout(text)


def _warn(message: str) -> None:
    """One warning line on stderr (names in it shown escaped)."""
    from traceview.render.escape import print_line

    print_line(stderr_console(), f"traceview: warning: {message}")


def check_save(out: OutputOptions, inputs: Sequence[Path]) -> None:
    """Before any reading: an -o file (``out.save``) that cannot be written is a usage error."""
    if out.save is not None:
        check_output_path(out.save, out.force, inputs)


def _check_output(out: OutputOptions, trace: Path) -> None:
    """Usage errors before any reading: a bad --format, an -o file that cannot be written."""
    _check_format(out.format)
    if out.output is not None:
        check_output_path(out.output, out.force, (trace,))


def show(out: OutputOptions, doc: Document, inputs: Sequence[Path] = ()) -> None:
    """A document on stdout in the chosen format (rich on a terminal, text when piped), or in
    the ``out.save`` file (never one of ``inputs``)."""
    from traceview.render.document import RENDERERS, plain_chunks, print_rich

    if out.save is not None:
        write_file(out.save, RENDERERS.get(out.format, plain_chunks)(doc), out.force, inputs)
    elif out.format in RENDERERS:
        write_stdout(RENDERERS[out.format](doc), json=out.format == "json")
    elif stdout_is_terminal():
        print_rich(doc, _stdout_console(out.wide))
    else:
        write_stdout(plain_chunks(doc))


def _check_format(fmt: str) -> None:
    check_choice("--format", fmt, Format)


def _stdout_console(wide: bool = False) -> Console:
    """The terminal; with --wide, one so wide that no table column is left out."""
    from rich.console import Console

    return Console(highlight=False, width=10_000 if wide else None)


@_command
def snapshot(path: Path, read: ReadOptions, output: Path | None, force: bool) -> None:
    """``traceview snapshot``: the JSON snapshot to stdout, or atomically to ``output``."""
    from traceview.analyses.snapshot import build_snapshot
    from traceview.app.snapshot_file import to_json

    if output is not None:
        check_output_path(output, force, (path,))
    text = to_json(build_snapshot(read_trace(path, read, unused=_unused())))
    if output is None:
        write_stdout(text, json=True)
    else:
        write_file(output, text, force, (path,), quiet=read.quiet)


@_command
def diff(
    base: Path, new: Path, options: DiffOptions, read: ReadOptions, out: OutputOptions
) -> None:
    """``traceview diff``: render the comparison; a failed gate raises (exit 1) afterwards."""
    from traceview.analyses.diff import check_options, compare
    from traceview.render import diff as render_diff

    check_choice("--format", out.format, DiffFormat)
    check_options(options)
    if base == new == Path("-"):
        raise UsageError("diff: only one side can be read from stdin (-)")
    check_save(out, (base, new))
    page = out.format == "html"
    if page:
        _check_diff_page(out, options)
    group, parts = options.group_by, options.explain
    (old_side, old_trust), (new_side, new_trust) = (
        _diff_side(p, read, group == "op", group == "fused-op", parts) for p in (base, new)
    )
    report = compare(old_side, new_side, options)
    if page and out.save is not None:
        write_diff_page(report, out.save, out.force, (base, new))
    else:
        show(out, render_diff.document(report, out.verbose), (base, new))
    _warn_trust(old_trust, new_trust)
    if not report.gate.passed:
        raise TraceviewError(render_diff.failure_message(report, out.verbose))


def _check_diff_page(out: OutputOptions, options: DiffOptions) -> None:
    """``diff -f html``: the page draws the --explain waterfall into the -o file; plotly is
    there (said before any reading, as ``report`` says it)."""
    from traceview.render.html.page import plotly_path

    if not options.explain:
        raise UsageError("diff -f html draws the --explain waterfall: add --explain")
    if out.save is None:
        raise UsageError("diff -f html writes a page: give its file with -o FILE")
    plotly_path()


def write_diff_page(report: DiffReport, output: Path, force: bool, inputs: Sequence[Path]) -> None:
    """The diff page of ``report`` (its explain's waterfall), written to ``output``."""
    import shlex

    from traceview import __version__
    from traceview.render.html import diff_page
    from traceview.render.html.page import PageInfo

    if report.explain is None:
        raise TraceviewError(
            "diff -f html: no waterfall to draw: --explain needs ProfilerSteps on both sides"
        )
    command = shlex.join(["traceview", *sys.argv[1:]])
    page = diff_page.render_bytes(report, PageInfo(__version__, command))
    write_file(output, page, force, tuple(inputs))


def _diff_side(
    path: Path, read: ReadOptions, ops: bool = False, fused: bool = False, parts: bool = False
) -> tuple[Side, Trust | None]:
    """A diff input: a snapshot (recognised by its content) or a trace, snapshotted here
    (``ops`` / ``fused``: its kernels by launching op / fused op too; ``parts``: each step's
    time in parts, for --explain); a trace's verdicts (analyses.audit) besides, from the same
    read (with its CPU rows; the snapshot from exactly what a read without them gives,
    columns.model.without_cpu). A snapshot or a pipe has none."""
    from traceview.analyses.audit import audit
    from traceview.analyses.diff import Side
    from traceview.analyses.snapshot import build_snapshot
    from traceview.app.snapshot_file import is_snapshot, load_snapshot
    from traceview.columns.model import without_cpu
    from traceview.read.stream import is_pipe

    if is_snapshot(path):
        return Side(str(path), "snapshot", load_snapshot(path)), None
    by_op = ops or fused
    keep = by_op or not is_pipe(path)
    events = read_trace(path, read, keep_cpu=keep, unused=_unused())
    trust = audit(events).figures if keep else None
    snapped = events if by_op or not keep else without_cpu(events)
    snapshot = build_snapshot(snapped, ops=ops, fused=fused, parts=parts)
    return Side(str(path), "trace", snapshot), trust


def _warn_trust(base: Trust | None, new: Trust | None) -> None:
    """A warning when both sides' verdicts are known and differ (docs/audit.md)."""
    if base is None or new is None:
        return
    from traceview.render.audit import trust_difference

    message = trust_difference(base, new)
    if message is not None:
        _warn(message)


@_command
def trim(path: Path, options: TrimOptions, read: ReadOptions, output: Path, force: bool) -> None:
    """``traceview trim``: the events ``options`` keep, copied to ``output`` as they were."""
    from traceview.app.memory import release_free_memory
    from traceview.app.trim import check_options, plan_cut
    from traceview.app.trim_copy import check_trim_paths, write_trimmed

    check_options(options)
    inputs = inputs_of((path,), options)
    check_trim_paths(path, output, force, inputs)
    events = read_trace(path, read, keep_cpu=False, index=True, unused=_unused())
    cut, stats = plan_cut(events, options), events.read
    del events
    release_free_memory()  # the columns are gone: the copy needs only its blocks
    write_trimmed(path, cut, read, output, force, inputs, stats)


@_command
def export(path: Path, read: ReadOptions, directory: Path, force: bool) -> None:
    """``traceview export``: the trace's tables as Parquet files in ``directory``."""
    from traceview.cache.store import EXPORT_FILES, export_tables
    from traceview.columns.model import canonical
    from traceview.render.output import check_export_dir, removed_on_failure

    check_export_dir(directory, force, (path,), EXPORT_FILES)
    with removed_on_failure(directory, EXPORT_FILES):
        # canonical as read: the read's own ids and columns go (the names, launches, flows and
        # frames renumbered: 26 MB at 7.8 GB); handed over as made, so that export_tables
        # lets go of each large table once written (nothing here holds them)
        names = export_tables(
            canonical(read_trace(path, read, keep_cpu=True, memory=True, frames=True)),
            directory,
        )
    stderr_console().print(f"Wrote {directory} ({', '.join(names)})", markup=False)


def cache_info(directory: Path | None) -> None:
    """``traceview cache info``."""
    from traceview.cache.manage import info_lines
    from traceview.render.escape import text_lines

    write_stdout(text_lines(info_lines(_cache_root(directory))) + "\n")


def cache_list(directory: Path | None) -> None:
    """``traceview cache list``."""
    from traceview.cache.manage import list_lines
    from traceview.render.escape import text_lines  # trace file names are data too

    write_stdout(text_lines(list_lines(_cache_root(directory))) + "\n")


def cache_clear(directory: Path | None) -> None:
    """``traceview cache clear``: remove every entry, the index and leftover temp dirs."""
    from traceview.cache.manage import clear

    root = _cache_root(directory)
    _report_removal(clear(root), root)


def cache_prune(directory: Path | None, max_size: str | None) -> None:
    """``traceview cache prune``: evict least recently used entries down to the size limit,
    and remove the temp dirs of killed runs."""
    from traceview.cache import manage

    limit = manage.parse_size(max_size, "--max-size") if max_size else manage.max_size()
    root = _cache_root(directory)
    evicted, tmp = manage.evict(root, limit), manage.remove_stale_tmp(root)
    _report_removal(
        manage.Removal(evicted.entries, tmp.tmp_dirs, evicted.failed + tmp.failed), root
    )


def _cache_root(directory: Path | None) -> Path:
    """The cache directory, checked to be a traceview cache (or absent)."""
    from traceview.cache import CacheSettings
    from traceview.cache.root import check

    root = CacheSettings(directory=directory).root()
    check(root)
    return root


def _report_removal(removal: Removal, root: Path) -> None:
    """What was removed on stderr; an error (exit 1) if anything could not be."""
    if removal.failed:
        raise TraceviewError(removal.summary(root))
    stderr_console().print(removal.summary(root), markup=False, soft_wrap=True)


@_command
def unique(
    path: Path, read: ReadOptions, out: OutputOptions, top: int, power: PowerOptions | None
) -> None:
    """``traceview unique``: the distinct kernels, to the terminal and as JSON lines (-o)."""
    from traceview.analyses.unique import kernel_sums, unique_kernels
    from traceview.render import unique as render_unique

    _check_format(out.format)
    inputs = inputs_of((path,), power)
    if out.output is not None:
        check_output_path(out.output, out.force, inputs)
    if power is not None:
        from traceview.analyses.energy import check_power_options

        check_power_options(power)
    events = read_trace(path, read, keep_cpu=True)
    if _nothing_to_show(events, out):
        return
    report = unique_kernels(events)
    energies = None
    if power is not None:
        from traceview.analyses.energy import PJ_PER_J

        row_pj = _energy(path, events, power, out).row_pj
        energies = [int(pj) / PJ_PER_J for pj in kernel_sums(report, row_pj)]
    stderr_console().print(render_unique.summary_line(report), markup=False, highlight=False)
    if out.output is not None:
        write_file(out.output, render_unique.json_lines(report, energies), out.force, inputs)
    show(out, render_unique.document(report, out.verbose, top, energies))


@_command
def energy(
    path: Path, read: ReadOptions, out: OutputOptions, top: int, power: PowerOptions
) -> None:
    """``traceview energy``: a power log attributed to devices and kernels."""
    from traceview.analyses.energy import check_power_options
    from traceview.render import energy as render_energy

    _check_format(out.format)
    check_power_options(power)
    inputs = inputs_of((path,), power)
    check_save(out, inputs)
    events = read_trace(path, read, unused=_unused())
    if _nothing_to_show(events, out):
        return
    report = _energy(path, events, power, out)
    show(out, render_energy.document(report, top, out.verbose), inputs)


def _energy(
    path: Path, events: TraceEvents, power: PowerOptions, out: OutputOptions
) -> EnergyReport:
    """Read the power log, attribute it, and say on stderr how it was aligned and its limits."""
    from traceview.analyses.energy import attribute, check_power_options, limits, read_log
    from traceview.app.recorded import with_recorded_zone
    from traceview.render.energy import window_line

    power, recorded = with_recorded_zone(power)
    gpu_map = check_power_options(power)
    log, zone_note = read_log(power)
    zone_note += recorded
    report = attribute(events, log, gpu_map)
    if log.skipped:
        _warn(f"{log.skipped} power log rows without a usable sample were skipped")
    if not report.devices:
        _warn("no GPU activity with a duration: no energy to attribute")
        return report
    console = stderr_console()
    for line in (zone_note, window_line(report)):
        console.print(f"traceview: {line}", markup=False, highlight=False, soft_wrap=True)
    for line in limits(report):
        _warn(line)
    return report


@_command
def report(
    path: Path, options: ReportOptions, read: ReadOptions, output: Path, force: bool
) -> None:
    """``traceview report``: one self-contained HTML page from one read of the trace."""
    from traceview.analyses.core.common import links_and_calls, work_out
    from traceview.analyses.core.devices import name_rank
    from traceview.analyses.core.prelaunch import without_runtime
    from traceview.cache import op_links as stored_links
    from traceview.columns.model import flows_for_frames
    from traceview.render.html.documents import calls_read, collect
    from traceview.render.html.page import plotly_path

    if options.rank is not None:
        raise UsageError(f"--rank {options.rank}: for a run (several rank files); {path} is one")
    check_output_path(output, force, (path,))
    plotly_path()  # the missing extra is said before any reading
    # glibc's thresholds stay the read's (not reuse_freed_memory): the documents' many
    # row-sized temporaries, each mapped and given back, not left in the heap's holes
    # (this process, warm at 7.83 GB: 260 -> 245-252 MB; benchmarks/RESULTS-rust-43c.md)
    where = stored_links.place(path, read)  # before the read: the trace's identity then
    events = read_trace(path, read, keep_cpu=True, memory=True, frames=True, unused=_unused())
    events = flows_for_frames(events)  # the flame graph's: none without frames
    # what reads the runtime calls first, before the links (its temporaries not on top of
    # them); the other documents go without the calls but for the launched mask (16 B a call)
    first = calls_read(events)
    rank = name_rank(events.names)
    linked = None if where is None or read.refresh else stored_links.load(where, events)
    if linked is None:
        linked = links_and_calls(events, rank)
        if where is not None:
            wait_for_cache_writes()  # the entry, written in the background
            stored_links.save(where, events, *linked)
    # the calls (40 MB at 7.8 GB) let go of before work_out finds the device gaps (its peak)
    events = without_runtime(events)
    held = [work_out(events, linked, rank)]  # handed over: collect lets go of most links
    del linked  # else this tuple would keep them
    write_page(collect(events, options, held.pop(), first), output, force, (path,))


def write_page(docs: Documents, output: Path, force: bool, inputs: Sequence[Path]) -> None:
    """The report page of ``docs``, written to ``output`` (never over one of the ``inputs``)."""
    import shlex

    from traceview import __version__
    from traceview.render.html.page import PageInfo, render_bytes

    command = shlex.join(["traceview", *sys.argv[1:]])
    write_file(output, render_bytes(docs, PageInfo(__version__, command)), force, tuple(inputs))
