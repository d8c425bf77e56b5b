"""The options with a fixed set of values, as enums: typer checks a value against them while
parsing (before any trace is opened) and lists them in ``--help``; the analyses and the run
layer check library callers with the same lists and the same message."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from traceview.errors import UsageError


class Format(StrEnum):
    """``--format`` of the commands whose output is one main table."""

    TABLE = "table"
    JSON = "json"
    CSV = "csv"
    MD = "md"


class SourceFormat(StrEnum):
    """``source --format``: a table's formats and collapsed stacks (flame graphs)."""

    TABLE = "table"
    JSON = "json"
    CSV = "csv"
    MD = "md"
    FOLDED = "folded"


class SourceBy(StrEnum):
    """``source --by``."""

    FRAME = "frame"
    MODULE = "module"


class DocumentFormat(StrEnum):
    """``--format`` of summary and diff (no CSV: they are not one table)."""

    TABLE = "table"
    JSON = "json"
    MD = "md"


class DiffFormat(StrEnum):
    """``diff --format``: DocumentFormat's, and html (the --explain waterfall page, -o)."""

    TABLE = "table"
    JSON = "json"
    MD = "md"
    HTML = "html"


class KernelSort(StrEnum):
    """``kernels --sort``."""

    COUNT = "count"
    DURATION = "duration"
    PERCENTAGE = "percentage"
    DURATION_PERCENTAGE = "duration-percentage"
    TOTAL = "total"
    MAX = "max"
    P99 = "p99"
    NAME = "name"


class KernelGroupBy(StrEnum):
    """``kernels --group-by``."""

    NAME = "name"
    SHORT = "short"
    CATEGORY = "category"
    FUSED_OP = "fused-op"
    OP = "op"


class DiffGroupBy(StrEnum):
    """``diff --group-by``."""

    NAME = "name"
    SHORT = "short"
    CATEGORY = "category"
    OP = "op"
    FUSED_OP = "fused-op"


class GapSort(StrEnum):
    """``gaps --gap-sort`` (avggap and maxgap are the older names of avg and max)."""

    COUNT = "count"
    AVG = "avg"
    MAX = "max"
    MIN = "min"
    STDEV = "stdev"
    TOTAL = "total"
    AVGGAP = "avggap"
    MAXGAP = "maxgap"


GAP_SORT_ALIASES = {GapSort.AVGGAP: GapSort.AVG, GapSort.MAXGAP: GapSort.MAX}


class OpLevel(StrEnum):
    """``ops --level``."""

    LEAF = "leaf"
    TOP = "top"


class OpGroupBy(StrEnum):
    """``ops --group-by``."""

    OP = "op"
    OP_SHAPES = "op+shapes"


def expected_one_of(flag: str, value: object, allowed: Iterable[str]) -> str:
    """The one message for a value outside its set: ``--sort 'x': expected one of a, b``."""
    return f"{flag} {str(value)!r}: expected one of {', '.join(allowed)}"


class StepPhase(StrEnum):
    """``--phase``: a step's phase (docs/metrics.md "Serving steps and phases")."""

    PREFILL = "prefill"
    DECODE = "decode"
    MIXED = "mixed"
    CAPTURE = "capture"
    WARMUP = "warmup"
    UNKNOWN = "unknown"


def check_choice(flag: str, value: str, allowed: type[StrEnum]) -> None:
    """A usage error unless ``value`` is one of ``allowed`` (for callers other than the CLI)."""
    if value not in allowed.__members__.values():
        raise UsageError(expected_one_of(flag, value, allowed))


__all__ = [
    "GAP_SORT_ALIASES",
    "DiffFormat",
    "DiffGroupBy",
    "DocumentFormat",
    "Format",
    "GapSort",
    "KernelGroupBy",
    "KernelSort",
    "OpGroupBy",
    "OpLevel",
    "StepPhase",
    "check_choice",
    "expected_one_of",
]
