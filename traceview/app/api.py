"""traceview as a library: open a trace once, ask it what the CLI asks.

Each method takes the CLI's options as keyword arguments, with the CLI's names (``--gap-top``
is ``gap_top``) and defaults, checked the same way (a bad value raises TraceviewError with the
CLI's message). It returns the analysis' own frozen result, with ``to_json()`` (the ``-f json``
document), ``to_arrow()`` and ``to_pandas()`` (the ``-f csv`` table) added.
"""

from __future__ import annotations

import functools
import inspect
import io
import math
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from traceview.app.reading import read_trace, wait_for_cache_writes
from traceview.choices import GapSort, KernelGroupBy, KernelSort, OpGroupBy, OpLevel, SourceBy
from traceview.errors import TraceviewError, UsageError
from traceview.options import ReadOptions
from traceview.render.trim_command import TRIM_MARGIN

if TYPE_CHECKING:
    from traceview.analyses.audit import Audit
    from traceview.analyses.core.steps import StepRow
    from traceview.analyses.core.trace import TraceSummary
    from traceview.analyses.energy import EnergyReport
    from traceview.analyses.gaps import GapReport
    from traceview.analyses.kernels import KernelReport
    from traceview.analyses.ops.model_flops import ModelFlops
    from traceview.analyses.ops.view import OpReport
    from traceview.analyses.source import SourceReport
    from traceview.analyses.summary import Overview
    from traceview.analyses.unique import UniqueReport
    from traceview.app.run_api import Run
    from traceview.columns.model import TraceEvents
    from traceview.render.document import Document

R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])
EVENT_TABLES = ("gpu", "runtime", "steps", "names", "streams", "launches", "comms", "comm_keys")


@dataclass(frozen=True)
class StepsReport:
    """``steps``: the trace's header and one row per ProfilerStep."""

    trace: TraceSummary
    rows: list[StepRow]
    flops: ModelFlops | None = None  # model FLOPs, MFU and tokens per step


class Tabular:
    """What every result of the API adds to its analysis' dataclass: its JSON and CSV forms
    (made by the call that returned it, with that call's options)."""

    _document: Callable[[Any], Document]

    def _doc(self) -> Document:
        if "_document" not in self.__dict__:
            raise TraceviewError("an unpickled result keeps its fields only: analyse again")
        return self._document(self)

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_document"}

    def to_json(self) -> dict[str, Any]:
        """The ``-f json`` document, as a dict."""
        return self._doc().data()

    def to_arrow(self) -> Any:
        """The ``-f csv`` table as a pyarrow Table (columns typed as pyarrow reads the CSV)."""
        import pyarrow.csv

        from traceview.render.document import to_csv_text

        doc = self._doc()
        if doc.csv is None:
            name = type(self).__name__
            raise UsageError(f"{name} has no table form (no -f csv): use to_json()")
        return pyarrow.csv.read_csv(io.BytesIO(to_csv_text(doc).encode()))

    def to_pandas(self) -> Any:
        """``to_arrow()`` as a pandas DataFrame (needs pandas)."""
        try:
            import pandas  # noqa: F401
        except ImportError:
            raise TraceviewError("to_pandas() needs pandas: pip install pandas") from None
        return self.to_arrow().to_pandas()


class GapTabular(Tabular):
    """A ``gaps`` result: its forms, and the listed gaps as a table."""

    def gaps_table(self) -> Any:
        """The gaps the report lists (``largest``: the N longest, longest first; ``largest=0``:
        every gap), one row each, as pyarrow: the fields of ``-f json``'s ``largest`` records
        (``ts_us``, ``gap_us``, ``cause``, ``before``, ``after``, … and ``cpu``, what the CPU
        was doing, as a struct). ``gaps_table().to_pandas()`` for pandas."""
        import pyarrow as pa

        records = self.to_json()["largest"]
        if not records:
            return pa.table({})
        return pa.Table.from_pylist(records)


_WITH_FORMS: dict[type, type] = {}


def _with_forms(
    result: R, document: Callable[[Any], Document], forms: type[Tabular] = Tabular
) -> R:
    """``result`` as an instance of a subclass of its class that adds the methods of
    ``forms`` (same fields, same values; the subclass is made once per class, at module
    level, so it pickles), its forms made by ``document``."""
    cls = type(result)
    sub = _WITH_FORMS.get(cls)
    if sub is None:
        sub = type(cls.__name__, (cls, forms), {})
        sub.__module__, sub.__qualname__ = __name__, cls.__name__
        setattr(sys.modules[__name__], cls.__name__, sub)
        _WITH_FORMS[cls] = sub
    out: R = object.__new__(sub)
    for f in fields(result):  # type: ignore[arg-type]
        object.__setattr__(out, f.name, getattr(result, f.name))
    object.__setattr__(out, "_document", document)
    return out


_NAMED_TABLES = ("gpu",)  # the tables whose ids events(names=True) looks up


def _named(table: Any, tables: dict[str, Any]) -> Any:
    """``table`` with its name, stream and kind ids replaced by what they stand for: names as
    a dictionary column (each name stored once), devices and streams as their trace values."""
    import pyarrow as pa

    from traceview.columns.schema import GPU_KINDS

    ids = table["name"].combine_chunks()
    names = tables["names.parquet"]["name"].combine_chunks()
    table = table.set_column(
        table.schema.get_field_index("name"), "name", pa.DictionaryArray.from_arrays(ids, names)
    )
    kinds = pa.DictionaryArray.from_arrays(
        table["kind"].combine_chunks().cast(pa.int32()), pa.array(GPU_KINDS)
    )
    table = table.set_column(table.schema.get_field_index("kind"), "kind", kinds)
    streams = tables["streams.parquet"]
    at = table.schema.get_field_index("stream")
    stream_ids = table["stream"].combine_chunks()
    table = table.remove_column(at)
    for k, column in enumerate(("device", "stream")):
        values = _trace_values(streams[column].to_pylist())
        table = table.add_column(at + k, column, values.take(stream_ids))
    return table


def _trace_values(texts: list[str]) -> Any:
    """The values of a streams column (JSON text, as export writes them) as an Arrow array:
    integers where every one is an integer, else their text."""
    import json

    import pyarrow as pa

    values = [json.loads(text) for text in texts]
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        try:
            return pa.array(values, pa.int64())
        except OverflowError:  # an id beyond 64 bits
            pass
    return pa.array(
        [v if isinstance(v, str) else text for v, text in zip(values, texts, strict=True)]
    )


# Every argument of the API, by name: what it takes, checked in this one place (``checked``)
# before a method runs. Natural forms become the CLI's words: ``pstep=5`` is ``"5"``,
# ``min_gap=5`` is ``"5"`` (µs, as on the command line). Anything else is a UsageError that
# names the argument and what it takes, never a TypeError from the inside.
Check = Callable[[Any], Any]


class _Refused(Exception):
    """Raised by a check: what the argument takes."""


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Refused("an integer")
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise _Refused("a string")
    return value


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise _Refused("True or False")
    return value


def _number_words(what: str) -> Check:
    """A CLI word (``"5us"``) or a number of µs (int or float), as the CLI's word."""

    def check(value: Any) -> str:
        if isinstance(value, str):
            return value
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            return repr(value) if isinstance(value, float) else str(value)
        raise _Refused(what)

    return check


def _steps(value: Any) -> str:
    """``"3"``, ``"2-5"``, ``"1,4"`` or a step number."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise _Refused('a step number or the CLI\'s words ("3", "2-5", "1,4")')


def _path(value: Any) -> str | os.PathLike[str]:
    text = isinstance(value, str | os.PathLike)
    if text and isinstance(os.fspath(value), str):
        return cast("str | os.PathLike[str]", value)
    raise _Refused("a path (a str or a pathlib.Path)")


def _trace(value: Any) -> Any:
    """A trace: a path, or a run's rank files (a list of paths)."""
    if isinstance(value, list | tuple):
        try:
            return [_path(v) for v in value]
        except _Refused:
            raise _Refused("a path, or a list of paths (a run's rank files)") from None
    try:
        return _path(value)
    except _Refused:
        raise _Refused("a path (a str or a pathlib.Path), or a list of paths") from None


def _words(value: Any) -> list[str]:
    """A list of strings (a string alone is a list of one, as one flag on the CLI)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return list(value)
    raise _Refused("a list of strings")


def _optional(check: Check) -> Check:
    def optional(value: Any) -> Any:
        return None if value is None else check(value)

    return optional


_DURATION = _number_words('a duration: a number of µs, or the CLI\'s words ("5us", "0.5ms")')
_COUNTS = ("top", "bins", "largest", "gap_top", "stream_top")
_WORDS = ("sort", "group_by", "include", "busy", "gap_sort", "level", "table", "engine")
_NAMES = ("name", "window", "power_tz", "step_regex", "glob", "rank_regex", "scheduler")
_FLAGS = ("linear", "per_stream", "no_context", "no_cpu", "force", "per_rank", "partial",
          "strict", "cache", "refresh", "verify")  # fmt: skip
_ARGUMENTS: dict[str, Check] = {
    **dict.fromkeys(_COUNTS, _int),
    **dict.fromkeys(("around_gap", "jobs"), _optional(_int)),
    **dict.fromkeys(_WORDS, _text),
    **dict.fromkeys(_NAMES, _optional(_text)),
    **dict.fromkeys(_FLAGS, _flag),
    **dict.fromkeys(("min_gap", "margin", "power_offset"), _DURATION),
    **dict.fromkeys(("hist_min", "hist_max"), _optional(_DURATION)),
    **dict.fromkeys(("stream", "device", "power_gpu"), _optional(_words)),
    **dict.fromkeys(("power", "output"), _path),
    **dict.fromkeys(("peaks", "cache_dir", "scheduler_file"), _optional(_path)),
    "pstep": _optional(_steps),
    "inputs": _trace,
}


def _check(where: str, name: str, value: Any, check: Check | None) -> Any:
    if check is None:
        return value
    try:
        return check(value)
    except _Refused as e:
        shown = repr(value) if len(repr(value)) <= 60 else f"a {type(value).__name__}"
        raise UsageError(f"{where}: {name}={shown}: takes {e}") from None


def checked(method: F, **own: Check) -> F:
    """``method`` with each argument given checked (and its natural forms turned into the
    CLI's) by ``_ARGUMENTS``, or by ``own`` for a name that means something else here;
    keywords gathered by ``**`` are checked by name too."""
    signature = inspect.signature(method)
    where = "traceview.open" if method.__name__ in ("__init__", "open_trace") else method.__name__

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as e:
            raise UsageError(f"{where}: {e}") from None
        for name, value in list(bound.arguments.items()):
            kind = signature.parameters[name].kind
            if kind is inspect.Parameter.VAR_KEYWORD:
                bound.arguments[name] = {
                    k: _check(where, k, v, _ARGUMENTS.get(k)) for k, v in value.items()
                }
            elif name != "self":
                bound.arguments[name] = _check(
                    where, name, value, own.get(name, _ARGUMENTS.get(name))
                )
        return method(*bound.args, **bound.kwargs)

    return cast(F, call)


def read_options(given: dict[str, Any]) -> ReadOptions:
    """The read options of ``traceview.open`` (quiet; ``cache_dir`` a str or a Path)."""
    if given.get("cache_dir") is not None:
        given = {**given, "cache_dir": Path(given["cache_dir"])}
    return ReadOptions(quiet=True, **given)


def _at_least(flag: str, value: int) -> int:
    """A count the CLI takes with min=0 (analyses whose options do not check it)."""
    if value < 0:
        raise UsageError(f"{flag} {value}: must not be negative (0 shows all)")
    return value


class Trace:
    """One trace file, read once (from its cache entry when it has one) and analysed on demand.
    Read options are the CLI's: ``partial``, ``strict``, ``cache``, ``refresh``, ``cache_dir``,
    ``verify``, ``step_regex``."""

    @functools.partial(checked, path=_path)
    def __init__(self, path: str | Path, **read: Any) -> None:
        self.path = Path(path)
        known = [f.name for f in fields(ReadOptions) if f.name != "quiet"]
        unknown = sorted(set(read) - set(known))
        if unknown:
            raise UsageError(f"traceview.open: unknown option {unknown[0]!r} ({', '.join(known)})")
        self.read_options = read_options(read)
        self._events: TraceEvents | None = None

    def _read(self) -> TraceEvents:
        """The trace's columns, CPU rows included, read once for every analysis."""
        if self._events is None:
            try:
                self._events = read_trace(self.path, self.read_options, True, phases=True)
            finally:
                wait_for_cache_writes()
        return self._events

    @checked
    def events(self, table: str = "gpu", names: bool = False) -> Any:
        """One of the trace's tables as pyarrow (the schema of ``traceview export``: integer ns,
        names and streams as ids into the ``names`` and ``streams`` tables, each sorted);
        ``names``: with the ids looked up instead (``name`` as text, ``stream`` as ``device``
        and ``stream``, ``kind`` as ``kernel``/``memcpy``/``memset``)."""
        from traceview.cache.store import event_tables
        from traceview.columns.model import canonical

        if table not in EVENT_TABLES:
            raise UsageError(f"events({table!r}): expected one of {', '.join(EVENT_TABLES)}")
        tables = event_tables(canonical(self._read()))
        out = tables[f"{table}.parquet"]
        return _named(out, tables) if names and table in _NAMED_TABLES else out

    @checked
    def kernels(
        self,
        sort: KernelSort | str = KernelSort.DURATION_PERCENTAGE,
        top: int = 10,
        group_by: KernelGroupBy | str = KernelGroupBy.NAME,
        pstep: str | None = None,
        include: str = "kernel",
        name: str | None = None,
    ) -> KernelReport:
        """``traceview kernels``."""
        from traceview.analyses.kernels import KernelOptions, analyse_kernels, check_options
        from traceview.parsing import parse_steps
        from traceview.render import kernels as render

        kinds = tuple(k.strip() for k in include.split(",") if k.strip())
        options = KernelOptions(
            sort=cast(KernelSort, sort),  # checked by check_options, as for the CLI
            top=top,
            group_by=cast(KernelGroupBy, group_by),
            include=kinds if "kernel" in kinds else ("kernel", *kinds),
            name_regex=name,
            steps=parse_steps(pstep) if pstep else (),
        )
        check_options(options)
        events = self._read()
        report = analyse_kernels(events, options)

        def document(r: KernelReport) -> Document:  # the CSV holds every row, as the CLI's
            every = analyse_kernels(events, replace(options, top=0), streamed=True)
            return render.document(r, False, every if options.top else r)

        return _with_forms(report, document)

    @checked
    def gaps(
        self,
        busy: str = "kernel,memcpy,memset",
        min_gap: str = "0",
        stream: list[str] | None = None,
        device: list[str] | None = None,
        pstep: str | None = None,
        hist_min: str | None = None,
        hist_max: str | None = None,
        bins: int = 20,
        linear: bool = False,
        largest: int = 10,
        gap_sort: GapSort | str = GapSort.TOTAL,
        gap_top: int = 15,
        per_stream: bool = False,
        no_context: bool = False,
        stream_top: int = 100,
    ) -> GapReport:
        """``traceview gaps``."""
        from traceview.analyses.gaps import analyse_gaps, check_options, options_from_words
        from traceview.render import gaps as render

        options = options_from_words(
            busy=busy, min_gap=min_gap, stream=stream, device=device, pstep=pstep,
            hist_min=hist_min, hist_max=hist_max, bins=bins, linear=linear, largest=largest,
            gap_sort=gap_sort, gap_top=gap_top, per_stream=per_stream, context=not no_context,
            stream_top=_at_least("--stream-top", stream_top),
        )  # fmt: skip
        check_options(options)
        report = analyse_gaps(self._read(), options)
        return _with_forms(report, lambda r: render.document(r, False), GapTabular)

    @checked
    def steps(self, top: int = 100) -> StepsReport:
        """``traceview steps``; ``top``: steps in the table (0: all; JSON and CSV hold all)."""
        from traceview.analyses.core.steps import step_table
        from traceview.analyses.core.trace import summarize
        from traceview.analyses.ops.model_flops import steps_model_flops
        from traceview.render import steps as render

        top = _at_least("--top", top)
        events = self._read()
        rows = step_table(events)
        report = StepsReport(summarize(events), rows, steps_model_flops(events, rows))
        return _with_forms(report, lambda r: render.document(r.trace, r.rows, top, r.flops))

    def summary(self) -> Overview:
        """``traceview summary``."""
        from traceview.analyses.summary import overview
        from traceview.render import summary as render

        return _with_forms(overview(self._read()), render.document)

    @checked
    def ops(
        self,
        level: OpLevel | str = OpLevel.LEAF,
        top: int = 20,
        group_by: OpGroupBy | str = OpGroupBy.OP,
        peaks: str | Path | None = None,
    ) -> OpReport:
        """``traceview ops``."""
        from traceview.analyses.ops.view import OpOptions, analyse_ops, check_options
        from traceview.render import ops as render

        options = OpOptions(
            level=cast(OpLevel, level),
            top=top,
            group_by=cast(OpGroupBy, group_by),
            peaks_file=Path(peaks) if peaks is not None else None,
        )
        check_options(options)
        events = self._read()

        def document(r: OpReport) -> Document:  # the CSV holds every op, as the CLI's
            return render.document(r, analyse_ops(events, replace(options, top=0)))

        return _with_forms(analyse_ops(events, options), document)

    @checked
    def energy(
        self,
        power: str | Path,
        power_tz: str | None = None,
        power_offset: str = "0",
        power_gpu: list[str] | None = None,
        top: int = 20,
    ) -> EnergyReport:
        """``traceview energy``: ``power`` is the nvidia-smi CSV log."""
        from traceview.analyses.energy import (
            PowerOptions,
            attribute,
            check_power_options,
            read_log,
        )
        from traceview.app.recorded import with_recorded_zone
        from traceview.render import energy as render

        options = PowerOptions(Path(power), power_tz, power_offset, tuple(power_gpu or ()))
        options, _ = with_recorded_zone(options)
        top = _at_least("--top", top)
        gpu_map = check_power_options(options)
        log, _ = read_log(options)
        report = attribute(self._read(), log, gpu_map)
        return _with_forms(report, lambda r: render.document(r, top, False))

    @checked
    def source(
        self, by: SourceBy | str = SourceBy.FRAME, pstep: str | None = None, top: int = 20
    ) -> SourceReport:
        """``traceview source``: GPU time by Python frame (``by="module"``: by nn.Module path);
        the trace is read again with its python frames."""
        from traceview.analyses.core.trace import summarize
        from traceview.analyses.source import SourceOptions, analyse_source
        from traceview.choices import check_choice
        from traceview.parsing import parse_steps
        from traceview.render import source as render

        check_choice("--by", str(by), SourceBy)
        top = _at_least("--top", top)
        steps = tuple(parse_steps(pstep)) if pstep else ()
        try:
            events = read_trace(self.path, self.read_options, frames=True, steps=bool(steps))
        finally:
            wait_for_cache_writes()
        report = analyse_source(events, SourceOptions(steps=steps))
        trace = summarize(events)
        return _with_forms(report, lambda r: render.document(trace, r, str(by), top))

    @checked
    def audit(self) -> Audit:
        """``traceview audit``: the checks and each headline figure's verdict. A file cut
        short is a finding here, not an error: it is read as ``partial=True`` reads it
        (``.untrusted`` is what makes the CLI exit 1)."""
        from traceview.analyses.audit import audit
        from traceview.analyses.ops.model_flops import has_mfu
        from traceview.render import audit as render

        events = self._events
        if events is None:  # read as the CLI reads it: to the cut, if any
            options = replace(self.read_options, partial=True)
            try:
                events = read_trace(self.path, options, True, phases=True)
            finally:
                wait_for_cache_writes()
        return _with_forms(audit(events, mfu=has_mfu(events)), render.document)

    @checked
    def unique(self, top: int = 20) -> UniqueReport:
        """``traceview unique`` (without ``--power``)."""
        from traceview.analyses.unique import unique_kernels
        from traceview.render import unique as render

        top = _at_least("--top", top)
        return _with_forms(
            unique_kernels(self._read()), lambda r: render.document(r, False, top, None)
        )

    @checked
    def trim(
        self,
        output: str | Path,
        pstep: str | None = None,
        window: str | None = None,
        around_gap: int | None = None,
        margin: str = TRIM_MARGIN,
        device: list[str] | None = None,
        no_cpu: bool = False,
        force: bool = False,
    ) -> Path:
        """``traceview trim``: the kept events written to ``output``; its path."""
        from traceview.app.trim import TrimOptions, check_options, plan_cut
        from traceview.app.trim_copy import check_trim_paths, write_trimmed
        from traceview.options import inputs_of
        from traceview.parsing import parse_steps

        out = Path(output)
        options = TrimOptions(
            steps=parse_steps(pstep) if pstep else (), window=window, around_gap=around_gap,
            margin=margin, devices=tuple(device) if device else None, cpu=not no_cpu,
        )  # fmt: skip
        check_options(options)
        inputs = inputs_of((self.path,), options)
        check_trim_paths(self.path, out, force, inputs)
        write_trimmed(
            self.path, plan_cut(self._read(), options), self.read_options, out, force, inputs
        )
        return out


@functools.partial(checked, path=_trace)
def open_trace(path: str | Path | Sequence[str | Path], **options: Any) -> Trace | Run:
    """A trace to analyse (``traceview.open``), or a run as the CLI tells one (a list of rank
    files, a directory, a glob, or ``glob=``): a ``Run``. Nothing is read until an analysis
    asks (a run's files are found at once)."""
    from traceview.app.run_api import Run
    from traceview.app.runs import is_run
    from traceview.options import RunOptions

    if not isinstance(path, str | os.PathLike):  # a list, by the check of ``checked``
        return Run(list(path), **options)
    path = Path(path)
    if is_run([path], RunOptions(glob=options.get("glob"))):
        return Run([path], **options)
    if not path.exists():
        raise UsageError(f"{path}: no such file")
    return Trace(path, **options)
