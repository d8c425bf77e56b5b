"""The run snapshot file: the document of traceview.analyses.runs.snapshot as JSON (the
roll-up and each rank's snapshot in the one-file snapshot's shape), recognised among the
inputs of ``traceview diff`` and read back with every snapshot in it checked."""

from __future__ import annotations

import re
from dataclasses import asdict
from pathlib import Path

import msgspec
import orjson

from traceview import __version__
from traceview.analyses.runs.snapshot import KIND, SCHEMA_VERSION, RunSnapshot
from traceview.app.snapshot_file import problem_of
from traceview.errors import TraceviewError
from traceview.read.discover import MAX_RANK
from traceview.read.stream import is_pipe, pipe_input
from traceview.side_files import MAX_BYTES, read_side_file, too_big

_MARK = re.compile(rb'"kind"\s*:\s*"traceview-run-snapshot"')
SNIFF_BYTES = 4096


def to_json(run: RunSnapshot) -> str:
    """One key per line at the top, each snapshot on its own lines (reviewable in a diff)."""
    doc = asdict(run)
    ranks = ",\n".join("  " + orjson.dumps(r).decode() for r in doc.pop("ranks"))
    head = ",\n".join(
        f"{orjson.dumps(k).decode()}: {orjson.dumps(v).decode()}" for k, v in doc.items()
    )
    return "{\n" + head + ',\n"ranks": [\n' + ranks + "\n]\n}\n"


def is_run_snapshot(path: Path) -> bool:
    """Whether ``path`` is a run snapshot: its first KB name the kind (it comes first).

    A pipe (``-``, a FIFO, ``<(...)``) is opened once and its first KB kept for whichever
    reader reads it next (read.stream): opening it again would find its data gone, or wait
    for a writer that never comes. A directory or a missing path is not one."""
    if is_pipe(path):
        return _MARK.search(pipe_input(path).peek(SNIFF_BYTES)) is not None
    if not path.is_file():
        return False
    try:
        with path.open("rb") as f:
            return _MARK.search(f.read(SNIFF_BYTES)) is not None
    except OSError:
        return False


def _read(path: Path) -> bytes:
    """The run snapshot's bytes (bounded); a pipe through the stream its sniff opened."""
    if not is_pipe(path):
        return read_side_file(path, "run snapshot")
    limit = MAX_BYTES["run snapshot"]
    data = pipe_input(path).take().read(limit + 1)
    if len(data) > limit:
        raise too_big(path, "run snapshot")
    return data


def load_run_snapshot(path: Path) -> RunSnapshot:
    """Read and validate a run snapshot; any problem is one TraceviewError naming the file."""
    data = _read(path)
    try:
        run = msgspec.json.decode(data, type=RunSnapshot)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise TraceviewError(f"{path}: not a valid run snapshot: {e}") from None
    except RecursionError:
        raise TraceviewError(f"{path}: not a valid run snapshot: nested too deeply") from None
    if run.kind != KIND or run.schema_version != SCHEMA_VERSION:
        raise TraceviewError(
            f"{path}: run snapshot kind {run.kind!r} schema_version {run.schema_version} is not "
            f"supported (traceview {__version__} reads {KIND} {SCHEMA_VERSION})"
        )
    for r in run.ranks:  # a rank is int64, as the files of a run are numbered
        if not 0 <= r.rank <= MAX_RANK:
            why = "beyond int64" if r.rank > 0 else "negative"
            raise TraceviewError(
                f"{path}: not a valid run snapshot: rank {r.rank} is {why}; ranks are 0 to 2^63-1"
            )
    checks = [("rollup", run.rollup)] + [(f"rank {r.rank}", r.snapshot) for r in run.ranks]
    for where, snapshot in checks:
        try:
            problem = problem_of(snapshot)
        except RecursionError:
            problem = "nested too deeply"
        if problem:
            raise TraceviewError(f"{path}: not a valid run snapshot: {where}: {problem}")
    return run
