"""``traceview source``: read the trace with its python frames, attribute, render, write."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from traceview.app.commands import OutputOptions, _command, check_save, show
from traceview.app.reading import read_trace
from traceview.choices import SourceFormat, check_choice
from traceview.options import ReadOptions
from traceview.render.output import write_file, write_stdout

if TYPE_CHECKING:
    from traceview.analyses.core.steps import Steps


@_command
def source(
    path: Path, read: ReadOptions, out: OutputOptions, by: str, top: int, steps: Steps = ()
) -> None:
    """``traceview source``: tables by frame or module, or collapsed stacks (``folded``)."""
    from traceview.analyses.core.trace import summarize
    from traceview.analyses.source import SourceOptions, analyse_source
    from traceview.columns.model import flows_for_frames
    from traceview.columns.schema import GPU_LAUNCH
    from traceview.render import source as render_source
    from traceview.render.escape import text_lines

    check_choice("--format", out.format, SourceFormat)
    check_save(out, (path,))
    # the launch configurations unread (``unique`` alone reads them: 4 B a GPU row)
    events = flows_for_frames(
        read_trace(path, read, frames=True, steps=bool(steps), unused=frozenset({GPU_LAUNCH}))
    )
    folded = out.format == SourceFormat.FOLDED
    report = analyse_source(events, SourceOptions(steps=steps, stacks=folded))
    if folded:
        text = "".join(render_source.folded(report))
        if out.save is not None:
            write_file(out.save, text, out.force, (path,))
        else:
            write_stdout(text)
        return
    if not report.has_frames and out.format == "table" and out.save is None:
        write_stdout(text_lines([render_source.no_frames_line(report)]) + "\n")
        return
    show(out, render_source.document(summarize(events), report, by, top), (path,))
