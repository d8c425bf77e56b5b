"""A plain table model rendered four ways: rich, aligned text, Markdown and CSV.

Cells may hold names from the trace: each rendering escapes them (see render.escape). The
rows of a table of every kernel of a trace (10^6 names) are made as they are written
(``each_row``), and the text renderings are written a chunk of rows at a time.
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar, overload

from traceview.analyses.core.streamed import Streamed
from traceview.render.escape import csv_cell, markdown_text, print_line, rich_text, visible
from traceview.render.wrap import fit_name, width_of

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

# A name column keeps the width that shows its longest name in two lines (at least the first,
# at most the second, or the name's own) while statistics can give way; a name longer than
# two lines of its column is shortened in the middle.
_TEXT_WIDTHS = (24, 40)
_LINES_AT_ONCE = 1 << 12  # rows written as one chunk of text

T = TypeVar("T")


@dataclass(frozen=True)
class Table:
    """Column headers (with alignment) and rows of already formatted cells."""

    headers: tuple[str, ...]
    right: tuple[bool, ...]
    rows: Sequence[tuple[str, ...]]


def each_row(
    items: Sequence[T], cells: Callable[[int, T], tuple[str, ...]]
) -> Sequence[tuple[str, ...]]:
    """The rows of ``items``, ``cells(k, item)`` for the k-th (from 1): a list, or, for
    ``Streamed`` items (every row of 10^6), rows made each time the table is read (text takes
    two passes: the widths, then the lines)."""
    if isinstance(items, Streamed):
        return _EachRow(items, cells)
    return [cells(k, item) for k, item in enumerate(items, 1)]


class _EachRow(Sequence[tuple[str, ...]]):
    def __init__(self, items: Sequence[T], cells: Callable[[int, T], tuple[str, ...]]):
        self._items = items
        self._cells = cells

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, i: int) -> tuple[str, ...]: ...

    @overload
    def __getitem__(self, i: slice) -> list[tuple[str, ...]]: ...

    def __getitem__(self, i: int | slice) -> tuple[str, ...] | list[tuple[str, ...]]:
        if isinstance(i, slice):
            return list(itertools.islice(self, *i.indices(len(self))))
        k = range(len(self))[i]
        return self._cells(k + 1, self._items[k])

    def __iter__(self) -> Iterator[tuple[str, ...]]:
        return itertools.starmap(self._cells, enumerate(self._items, 1))


def fit(table: Table, width: int, drop_order: Sequence[str]) -> tuple[Table, list[str]]:
    """Drop columns named in ``drop_order`` (first first) until the table fits ``width``;
    the table and the headers dropped."""
    dropped = []
    for header in drop_order:
        if _width(table) <= width or header not in table.headers:
            continue
        i = table.headers.index(header)
        table = Table(
            table.headers[:i] + table.headers[i + 1 :],
            table.right[:i] + table.right[i + 1 :],
            [row[:i] + row[i + 1 :] for row in table.rows],
        )
        dropped.append(header)
    return table, dropped


def _width(table: Table) -> int:
    """Width the table needs with text columns at the width they want: rich's simple box
    takes 3 characters a column and 1 more (padding and edges)."""
    return sum(_min_width(table, i) + 3 for i in range(len(table.headers))) + 1


def _longest(table: Table, i: int) -> int:
    return max([width_of(table.headers[i]), *(width_of(row[i]) for row in table.rows)])


def _min_width(table: Table, i: int) -> int:
    longest = _longest(table, i)
    if table.right[i]:
        return longest
    least, most = _TEXT_WIDTHS
    return min(longest, max(least, min(most, (longest + 1) // 2 + 4)))


def _text_widths(table: Table, width: int) -> dict[int, int]:
    """The width of each text column: the room the numbers leave, shared out (a column
    shorter than its share keeps its length, the others fold their names)."""
    text = [i for i, right in enumerate(table.right) if not right]
    room = width - 1 - sum(_longest(table, i) + 3 for i, r in enumerate(table.right) if r)
    room -= 3 * len(text)
    out: dict[int, int] = {}
    pending = sorted(text, key=lambda i: _longest(table, i))
    while pending:
        share = max(room // len(pending), 4)
        i = pending.pop(0)
        out[i] = min(_longest(table, i), share)
        room -= out[i]
    return out


def to_rich(
    table: Table, console: Console, title: str | None = None, drop_order: Sequence[str] = ()
) -> None:
    """Print as a rich table; on a narrow terminal drop the ``drop_order`` columns first and
    say which under the table (numbers are never cropped: a name takes two lines, and is
    shortened in the middle when longer)."""
    from rich import box
    from rich.table import Table as RichTable

    table, dropped = fit(_visible(table), console.width, drop_order)
    rich_title = None if title is None else rich_text(title)
    rich_table = RichTable(title=rich_title, box=box.SIMPLE_HEAD, header_style="bold")
    text_width = _text_widths(table, console.width)
    for i, (header, right) in enumerate(zip(table.headers, table.right, strict=True)):
        rich_table.add_column(
            rich_text(header),
            justify="right" if right else "left",
            overflow="fold",
            no_wrap=right,
            width=None if right else text_width[i],
        )
    for row in table.rows:
        rich_table.add_row(*(_fitted(cell, text_width.get(i)) for i, cell in enumerate(row)))
    console.print(rich_table)
    if dropped:
        hidden = f"hidden at {console.width} columns: {', '.join(dropped)}; use --wide or -f md"
        print_line(console, hidden)


def _fitted(cell: str, width: int | None) -> Text:
    """A cell (already visible) for rich; a text cell in at most two lines of its column's
    ``width`` (None: a number's cell)."""
    from rich.text import Text

    return Text(cell if width is None else "\n".join(fit_name(cell, width)))


def to_text(table: Table) -> str:
    """Aligned plain text, for pipes and reports."""
    return "".join(text_chunks(table))


def text_chunks(table: Table) -> Iterator[str]:
    """``to_text``, a chunk of lines at a time (the rows are read twice: widths, lines)."""
    headers = tuple(visible(h) for h in table.headers)
    widths = [len(h) for h in headers]
    for row in table.rows:
        widths = [max(w, len(visible(cell))) for w, cell in zip(widths, row, strict=True)]

    def line(cells: Iterable[str]) -> str:
        parts = [
            cell.rjust(w) if right else cell.ljust(w)
            for cell, w, right in zip(cells, widths, table.right, strict=True)
        ]
        return "  ".join(parts).rstrip() + "\n"

    yield line(headers) + "  ".join("-" * w for w in widths) + "\n"
    for rows in batched(table.rows, _LINES_AT_ONCE):
        yield "".join(line(map(visible, row)) for row in rows)


def to_markdown(table: Table) -> str:
    """A GitHub-flavoured Markdown table."""
    return "".join(markdown_chunks(table))


def markdown_chunks(table: Table) -> Iterator[str]:
    """``to_markdown``, a chunk of rows at a time."""

    def line(cells: tuple[str, ...]) -> str:
        return "| " + " | ".join(markdown_text(c) for c in cells) + " |\n"

    yield line(table.headers) + "|" + "|".join("---:" if r else "---" for r in table.right) + "|\n"
    for rows in batched(table.rows, _LINES_AT_ONCE):
        yield "".join(map(line, rows))


def to_csv(headers: tuple[str, ...], rows: Iterable[tuple[object, ...]]) -> str:
    """CSV with raw (unformatted) numbers; text escaped and kept from reading as a formula."""
    return "".join(csv_chunks(headers, rows))


def csv_chunks(headers: tuple[str, ...], rows: Iterable[tuple[object, ...]]) -> Iterator[str]:
    """``to_csv``, a chunk of rows at a time (``rows`` are read once)."""
    import csv  # only for -f csv (start-up)

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([csv_cell(h) for h in headers])
    for chunk in batched(rows, _LINES_AT_ONCE):
        writer.writerows([csv_cell(v) for v in row] for row in chunk)
        yield out.getvalue()
        out.seek(0)
        out.truncate()
    if out.tell():  # no rows: the headers alone
        yield out.getvalue()


def batched(items: Iterable[T], n: int) -> Iterator[list[T]]:
    """Lists of ``n`` items (the last shorter): ``itertools.batched`` of Python 3.12."""
    it = iter(items)
    while chunk := list(itertools.islice(it, n)):
        yield chunk


def _visible(table: Table) -> Table:
    """The table with control characters in its cells shown as escapes."""
    return Table(
        tuple(visible(h) for h in table.headers),
        table.right,
        [tuple(visible(c) for c in row) for row in table.rows],
    )
