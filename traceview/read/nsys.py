"""Open an Nsight Systems SQLite export read-only and stream its rows as numpy batches.

The file is recognised by its content (the SQLite magic), opened with ``mode=ro`` (no write,
no journal; a database in WAL mode is refused, since reading one may create ``-wal`` and
``-shm`` files next to it) and read with SELECTs in rowid order, ``fetchmany`` at a time,
so memory does not grow with the file. Tables exist only when they hold data: a missing
one is simply empty. Every SQLite error becomes one TraceviewError naming the file.
"""

from __future__ import annotations

import stat
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from traceview.errors import TraceviewError
from traceview.read.source import GZIP_MAGIC

if TYPE_CHECKING:
    import sqlite3  # imported when an export is opened: a JSON trace never needs it

SQLITE_MAGIC = b"SQLite format 3\x00"
_HEADER_BYTES = 100
# The report format is proprietary and its magic is not documented: known by its suffix.
REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
BATCH_ROWS = 1 << 15
# Seconds to wait for a writer's lock to go before giving up with "database is locked".
LOCK_TIMEOUT = 2.0
_IN_CHUNK = 500  # ids per "IN (...)" query, under SQLite's bound-parameter limit


def is_sqlite(path: Path) -> bool:
    """Whether ``path`` is an SQLite database, by its first bytes. A report that still needs
    ``nsys export`` and a gzip-compressed database are errors that say what to do."""
    head = _head(path)
    if head.startswith(SQLITE_MAGIC):
        return True
    if head.startswith(GZIP_MAGIC) and _inflated_head(path).startswith(SQLITE_MAGIC):
        raise TraceviewError(
            f"{path}: a gzip-compressed SQLite database; decompress it first "
            f"(gunzip -k {path}) and pass the .sqlite file"
        )
    if path.suffix.lower() in REPORT_SUFFIXES:
        raise TraceviewError(
            f"{path}: an Nsight Systems report, whose format only nsys reads; export it "
            f"first with: nsys export --type sqlite {path}"
        )
    return False


def _head(path: Path, size: int = _HEADER_BYTES) -> bytes:
    """The first bytes of a regular file; b"" for anything else (a pipe must not be read
    here: the trace reader reports it, or what cannot be opened)."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return b""
        with path.open("rb") as f:
            return f.read(size)
    except OSError:
        return b""


def _inflated_head(path: Path) -> bytes:
    """The first decompressed bytes of a gzip file (a deflate block's tables come first)."""
    try:
        return zlib.decompressobj(wbits=31).decompress(_head(path, 1 << 16), len(SQLITE_MAGIC))
    except zlib.error:
        return b""


def check_header(path: Path, head: bytes, size: int) -> None:
    """Refuse what SQLite would read wrongly or only by writing: a WAL database, a file
    shorter than its header says (truncated), a header that is not SQLite's."""
    if len(head) < _HEADER_BYTES:
        raise TraceviewError(f"{path}: truncated SQLite database (no complete header)")
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    if page < 512 or page & (page - 1):
        raise TraceviewError(f"{path}: corrupt SQLite database (page size {page})")
    if head[18] == 2 or head[19] == 2:
        raise TraceviewError(
            f"{path}: SQLite database in WAL mode, which nsys does not write; reading it "
            "could create files next to it, so it is not read"
        )
    pages = int.from_bytes(head[28:32], "big")
    if head[24:28] == head[92:96] and pages and size < pages * page:
        raise TraceviewError(f"{path}: truncated SQLite database ({size} of {pages * page} bytes)")
    if size % page:
        raise TraceviewError(f"{path}: truncated SQLite database ({size} bytes, pages of {page})")


def text_of(value: Any) -> str:
    """A text cell as str: a BLOB's bytes decoded as UTF-8 (what is not becomes U+FFFD)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class Export:
    """An open nsys export: which tables and columns it has, rows in batches, strings."""

    def __init__(self, path: Path) -> None:
        self.path = path
        size = path.stat().st_size
        check_header(path, _head(path), size)
        self.size_bytes = size
        import sqlite3

        uri = f"{path.absolute().as_uri()}?mode=ro"
        self._db = self._guard(lambda: sqlite3.connect(uri, uri=True, timeout=LOCK_TIMEOUT))
        # Text that is not UTF-8 (Latin-1 NVTX strings) becomes U+FFFD, as in JSON traces.
        self._db.text_factory = lambda raw: raw.decode("utf-8", "replace")
        self.tables: set[str] = set()
        self._indexed: bool | None = None
        try:
            self._execute("PRAGMA query_only = ON")
            sql = "SELECT name FROM sqlite_master WHERE type = 'table'"
            self.tables = {row[0] for row in self._execute(sql).fetchall()}
        except TraceviewError:
            self.close()
            raise
        if "StringIds" not in self.tables:
            self.close()
            raise TraceviewError(
                f"{path}: an SQLite database but not an Nsight Systems export (no StringIds "
                "table); export the report with: nsys export --type sqlite REPORT"
            )

    def _guard(self, call: Any) -> Any:
        """``call()``, with an SQLite error as one line naming the file."""
        import sqlite3

        try:
            return call()
        except sqlite3.Error as e:
            raise TraceviewError(f"{self.path}: cannot read the SQLite database: {e}") from None

    def _execute(self, sql: str, params: Iterable[Any] = ()) -> sqlite3.Cursor:
        return self._guard(lambda: self._db.execute(sql, tuple(params)))  # type: ignore[no-any-return]

    def columns(self, table: str) -> set[str]:
        """The column names of ``table`` (empty when the table does not exist)."""
        if table not in self.tables:
            return set()
        rows = self._execute(f'PRAGMA table_info("{table}")').fetchall()
        return {row[1] for row in rows}

    def row_estimate(self, table: str) -> int:
        """The largest rowid: the row count of a table nsys wrote (no deletes), at no cost."""
        if table not in self.tables:
            return 0
        value = self._execute(f'SELECT max(rowid) FROM "{table}"').fetchone()[0]
        return value if isinstance(value, int) else 0

    def int_batches(self, sql: str, table: str) -> Iterator[np.ndarray]:
        """The rows of an integer-only SELECT as 2-D int64 arrays of up to BATCH_ROWS rows.
        NULLs must be replaced in the SQL; any value that is not an integer is an error."""
        cursor = self._execute(sql)
        while rows := self._guard(lambda: cursor.fetchmany(BATCH_ROWS)):
            batch = np.array(rows)
            if batch.dtype.kind != "i":
                raise TraceviewError(
                    f"{self.path}: {table}: a value that is not an integer where nsys "
                    "writes integers (not an nsys export, or a damaged one)"
                )
            yield batch.astype(np.int64, copy=False)

    def text_batches(self, sql: str, table: str) -> Iterator[tuple[np.ndarray, list[Any]]]:
        """Like int_batches for a SELECT whose last column is text: (integers, texts)."""
        cursor = self._execute(sql)
        while rows := self._guard(lambda: cursor.fetchmany(BATCH_ROWS)):
            texts = [row[-1] for row in rows]
            numbers = np.array([row[:-1] for row in rows])
            if numbers.dtype.kind != "i":
                raise TraceviewError(
                    f"{self.path}: {table}: a value that is not an integer where nsys "
                    "writes integers (not an nsys export, or a damaged one)"
                )
            yield numbers.astype(np.int64, copy=False), texts

    def strings(self, ids: Iterable[int]) -> dict[int, str]:
        """StringIds values by id (ids without a string are left out): looked up by id when
        the table has an index on it, else in one scan (a lookup per id would scan it all)."""
        wanted = list(ids)
        found: dict[int, str] = {}
        if not self._strings_indexed():
            want = set(wanted)
            cursor = self._execute("SELECT id, value FROM StringIds")
            while batch := self._guard(lambda: cursor.fetchmany(BATCH_ROWS)):
                found.update((k, text_of(v)) for k, v in batch if k in want and v is not None)
            return found
        for start in range(0, len(wanted), _IN_CHUNK):
            chunk = wanted[start : start + _IN_CHUNK]
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT id, value FROM StringIds WHERE id IN ({marks})"
            rows = self._execute(sql, chunk).fetchall()
            found.update((k, text_of(v)) for k, v in rows if v is not None)
        return found

    def _strings_indexed(self) -> bool:
        """Whether StringIds.id is its primary key or leads an index (nsys makes it the
        INTEGER PRIMARY KEY; a rewritten export may have lost it)."""
        if self._indexed is None:
            pk = any(row[1] == "id" and row[5] == 1 for row in self._pragma("table_info"))
            self._indexed = pk or any(
                [c[2] for c in self._pragma(f'index_info("{row[1]}")')][:1] == ["id"]
                for row in self._pragma("index_list")
            )
        return self._indexed

    def _pragma(self, what: str) -> list[Any]:
        sql = f"PRAGMA {what}" if "(" in what else f'PRAGMA {what}("StringIds")'
        return self._execute(sql).fetchall()

    def max_string_id(self) -> int:
        value = self._execute("SELECT max(id) FROM StringIds").fetchone()[0]
        return value if isinstance(value, int) else -1

    def dict_rows(self, table: str) -> list[dict[str, Any]]:
        """All rows of a small table (target information, enums) as dicts."""
        if table not in self.tables:
            return []
        cursor = self._execute(f'SELECT * FROM "{table}" ORDER BY rowid')
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in self._guard(cursor.fetchall)]

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Export:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
