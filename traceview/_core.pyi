"""traceview's compiled core (rust/): the chunk scanner, a gzip reader. For traceview.read."""

from typing import Any

GPU_COLUMNS: list[tuple[str, str]]
RUNTIME_COLUMNS: list[tuple[str, str]]
OP_COLUMNS: list[tuple[str, str]]
FRAME_COLUMNS: list[tuple[str, str]]
FLOW_COLUMNS: list[tuple[str, str]]
CPU_MARKS: list[tuple[str, int]]
MAX_DEPTH: int
COMM_CHECKED: int

def scan_chunk(
    data: Any,
    exact: bool,
    keep_cpu: bool,
    drop: dict[str, list[bytes]] | None = None,
    keep_frames: bool = False,
    seen: bool = False,
    start: int = 0,
    end: int | None = None,
) -> dict[str, Any]:
    """Scan one chunk of whole events (``data[start:end]``, a bytes-like object: a ``bytes``
    one is scanned where it lies, any other copied; events separated by commas);
    ``keep_cpu``: CPU ops and step-marker python frames as rows; ``keep_frames`` (with
    ``keep_cpu``): python frames and fwdbwd flows as rows too; ``drop``: the events the
    collector never keeps (traceview.columns.collect.scan_rule), counted and not decoded.

    Accepted: ``events``, ``dropped``; the GPU columns ``gpu_<name>``, runtime columns
    ``rt_<name>``, CPU op, frame and flow columns ``op_<name>``, ``frame_<name>``,
    ``flow_<name>`` as little-endian bytes; the chunk's tables as JSON arrays (``gpu_names``,
    ``streams``, ``launches``, ``rt_names``, ``threads``, ``op_threads``, ``op_names``,
    ``frame_threads``, ``frame_names``, ``flow_threads``); ``shapes``: the CPU ops' shape keys
    separated by 0x1e; ``others``: the events left to the Python decoder, as one JSON array
    text; ``comm_chunk``: b"\x01" where the chunk holds a collective's metadata (its events
    are decoded with the collectives' types), else b"\x00"; ``comm_events``: in such a
    chunk, the rows with a field those types read as any value, as one JSON array text;
    ``comm_rows``: theirs (int64; ≥ 0 a GPU row, < 0 the CPU op row −1 − n, COMM_CHECKED a
    runtime call, only to be decoded); with ``seen``, ``seen``: what trim's copy needs to
    leave the chunk unread, [known, events, metadata, all timed, least ts, greatest end,
    least and greatest GPU correlation, a GPU process shown] (ns; known 0: an event trim's
    span scan would not take as it is). Refused: ``{"refused": why, "at": offset}``."""

class GzipReader:
    """A gzip file inflated on a thread of its own, ``ahead`` blocks of at most
    ``block_size`` bytes in front of the reader, read ``read_size`` bytes at a time."""

    def __init__(self, path: Any, read_size: int, block_size: int, ahead: int) -> None: ...
    def read(self) -> tuple[str, bytes, int, int, str]:
        """(status, block, end, consumed, message): status "" for a block; then "end",
        "truncated", "trailing", "corrupt" or "io" (``end``: decompressed bytes so far)."""
    def read_into(self, into: memoryview) -> tuple[str, int, int, int, str]:
        """(status, written, end, consumed, message): as ``read``, the block's bytes written
        into ``into`` (a writable memoryview: as many as it holds, the rest next time)."""
    def skip_before(self, offset: int) -> None:
        """Blocks that end before ``offset`` are inflated but not sent."""
    def close(self) -> None:
        """Stop the thread and wait for it."""

class ChunkScanner:
    """Chunks scanned on ``threads`` threads of their own, at most ``ahead`` in flight,
    taken back in the order they were given (each as ``scan_chunk`` gives it)."""

    def __init__(
        self,
        threads: int,
        ahead: int,
        keep_cpu: bool,
        drop: dict[str, list[bytes]] | None = None,
        keep_frames: bool = False,
        seen: bool = False,
    ) -> None: ...
    def submit(self, data: Any, exact: bool) -> bool:
        """Scan a copy of ``data``; False (nothing done) when ``ahead`` are in flight."""
    def next(self) -> dict[str, Any]:
        """The oldest chunk in flight, scanned (waits for it); RuntimeError if none is."""
    def last_text(self) -> bytes:
        """The text of the chunk ``next()`` gave last."""
    def in_flight(self) -> int:
        """Chunks given and not yet taken."""
    def close(self) -> None:
        """Drop the chunks in flight and stop the threads."""

SPAN_COLUMNS: list[tuple[str, str]]

def trim_spans(data: Any) -> dict[str, Any]:
    """Each event's span and the fields trim judges by, for one chunk of whole events:
    the SPAN_COLUMNS as little-endian bytes, ``events``, and the tables ``phs``, ``cats``,
    ``pids``, ``devices`` as JSON arrays. Refused: ``{"refused": why, "at": offset}``."""

def join_spans(data: Any, spans: Any) -> bytes:
    """The spans of ``data`` (little-endian int64 start, end pairs) joined by ``,\\n``."""

def flow_id_hash(text: bytes) -> int:
    """The hash of a flow id's raw text, as ``trim_spans`` gives it in ``flow``."""
