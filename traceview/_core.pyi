"""traceview's compiled core (rust/): the chunk scanner. Private: used by traceview.read only."""

from typing import Any

GPU_COLUMNS: list[tuple[str, str]]
RUNTIME_COLUMNS: list[tuple[str, str]]
MAX_DEPTH: int

def scan_chunk(
    data: Any, exact: bool, keep_cpu: bool, drop: dict[str, list[bytes]] | None = None
) -> dict[str, Any]:
    """Scan one chunk of whole events (a bytes-like object, events separated by commas);
    ``drop``: the events the collector never keeps (traceview.columns.collect.scan_rule),
    counted and not decoded.

    Accepted: ``events``, ``dropped``; the GPU columns ``gpu_<name>``, runtime columns
    ``rt_<name>`` as little-endian bytes; the chunk's tables as JSON arrays (``gpu_names``,
    ``streams``, ``launches``, ``rt_names``, ``threads``); ``others``: the events left to the
    Python decoder, as one JSON array text. Refused: ``{"refused": why, "at": offset}``."""

SPAN_COLUMNS: list[tuple[str, str]]

def trim_spans(data: Any) -> dict[str, Any]:
    """Each event's span and the fields trim judges by, for one chunk of whole events:
    the SPAN_COLUMNS as little-endian bytes, ``events``, and the tables ``phs``, ``cats``,
    ``pids``, ``devices`` as JSON arrays. Refused: ``{"refused": why, "at": offset}``."""

def join_spans(data: Any, spans: Any) -> bytes:
    """The spans of ``data`` (little-endian int64 start, end pairs) joined by ``,\\n``."""

def flow_id_hash(text: bytes) -> int:
    """The hash of a flow id's raw text, as ``trim_spans`` gives it in ``flow``."""
