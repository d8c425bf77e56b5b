"""A plain table model rendered four ways: rich, aligned text, Markdown and CSV.

Cells may hold names from the trace: each rendering escapes them (see render.escape).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from traceview.render.escape import csv_cell, markdown_text, rich_text, visible

if TYPE_CHECKING:
    from rich.console import Console

_MIN_TEXT_WIDTH = 24  # a name column never shrinks below this on a narrow terminal


@dataclass(frozen=True)
class Table:
    """Column headers (with alignment) and rows of already formatted cells."""

    headers: tuple[str, ...]
    right: tuple[bool, ...]
    rows: Sequence[tuple[str, ...]]


def fit(table: Table, width: int, drop_order: Sequence[str]) -> Table:
    """Drop columns named in ``drop_order`` (first first) until the table fits ``width``."""
    for header in drop_order:
        if _width(table) <= width or header not in table.headers:
            continue
        i = table.headers.index(header)
        table = Table(
            table.headers[:i] + table.headers[i + 1 :],
            table.right[:i] + table.right[i + 1 :],
            [row[:i] + row[i + 1 :] for row in table.rows],
        )
    return table


def _width(table: Table) -> int:
    """Width the table needs with text columns at their minimum and 2 spaces between cells."""
    total = 0
    for i, (header, right) in enumerate(zip(table.headers, table.right, strict=True)):
        longest = max([len(header), *(len(row[i]) for row in table.rows)])
        total += (longest if right else min(longest, _MIN_TEXT_WIDTH)) + 3
    return total


def to_rich(
    table: Table, console: Console, title: str | None = None, drop_order: Sequence[str] = ()
) -> None:
    """Print as a rich table; on a narrow terminal drop the ``drop_order`` columns first."""
    from rich import box
    from rich.table import Table as RichTable

    table = fit(_visible(table), console.width, drop_order)
    rich_title = None if title is None else rich_text(title)
    rich_table = RichTable(title=rich_title, box=box.SIMPLE_HEAD, header_style="bold")
    for i, (header, right) in enumerate(zip(table.headers, table.right, strict=True)):
        longest = max((len(row[i]) for row in table.rows), default=0)
        rich_table.add_column(
            rich_text(header),
            justify="right" if right else "left",
            overflow="fold",
            no_wrap=right,
            min_width=None if right else min(_MIN_TEXT_WIDTH, max(longest, len(header))),
        )
    for row in table.rows:
        rich_table.add_row(*(rich_text(cell) for cell in row))
    console.print(rich_table)


def to_text(table: Table) -> str:
    """Aligned plain text, for pipes and reports."""
    table = _visible(table)
    cells = [table.headers, *table.rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(table.headers))]
    lines = []
    for row in cells:
        parts = [
            cell.rjust(w) if right else cell.ljust(w)
            for cell, w, right in zip(row, widths, table.right, strict=True)
        ]
        lines.append("  ".join(parts).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n"


def to_markdown(table: Table) -> str:
    """A GitHub-flavoured Markdown table."""

    def line(cells: tuple[str, ...]) -> str:
        return "| " + " | ".join(markdown_text(c) for c in cells) + " |"

    rule = "|" + "|".join("---:" if right else "---" for right in table.right) + "|"
    return "\n".join([line(table.headers), rule, *(line(r) for r in table.rows)]) + "\n"


def to_csv(headers: tuple[str, ...], rows: Sequence[tuple[object, ...]]) -> str:
    """CSV with raw (unformatted) numbers; text escaped and kept from reading as a formula."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([csv_cell(h) for h in headers])
    writer.writerows([csv_cell(v) for v in row] for row in rows)
    return out.getvalue()


def _visible(table: Table) -> Table:
    """The table with control characters in its cells shown as escapes."""
    return Table(
        tuple(visible(h) for h in table.headers),
        table.right,
        [tuple(visible(c) for c in row) for row in table.rows],
    )
