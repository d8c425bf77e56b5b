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
