"""The report model: every command's result as one document, rendered by generic renderers.

A command turns its typed result into a ``Document``: header lines, sections (a table or lines,
each with an optional title and note), footer lines, and the two machine-readable forms, its
JSON document and its CSV. The renderers below know nothing of any command, so the terminal,
text, Markdown, CSV and JSON outputs all show the same notes and the same "left out" facts,
and a new format (HTML) is one more renderer in ``RENDERERS``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from traceview.render.escape import markdown_list, markdown_text, print_line, text_lines
from traceview.render.tables import Table, to_markdown, to_rich, to_text

if TYPE_CHECKING:
    from rich.console import Console


@dataclass(frozen=True)
class Lines:
    """Lines of text; ``aligned``: columns of numbers (a code block in Markdown)."""

    lines: Sequence[str]
    aligned: bool = False


@dataclass(frozen=True)
class Section:
    """A table or lines, under an optional title, with an optional note below.

    ``drop_order``: the table's columns that may be left out, first first, on a terminal too
    narrow for all of them (the renderer says which it left out)."""

    body: Table | Lines
    title: str | None = None
    note: str | None = None
    drop_order: Sequence[str] = ()


@dataclass(frozen=True)
class Document:
    """One command's output. ``data`` builds the JSON document (with its ``schema_version``);
    ``csv`` the CSV text (raw numbers, one row per item of the main table), None for a
    command without a CSV form (its --format check refuses csv before the trace is read)."""

    head: Sequence[str]
    sections: Sequence[Section]
    data: Callable[[], dict[str, Any]]
    csv: Callable[[], str] | None
    foot: Sequence[str] = field(default_factory=tuple)
    # The footer's style on a terminal (a verdict in green or red); a Markdown document's first
    # line, in bold (a review comment's headline).
    foot_style: str | None = None
    title: str | None = None
    # Documents shown after this one, each under its heading (a run's ranks, one by one).
    parts: Sequence[tuple[str, Document]] = field(default_factory=tuple)


def to_json_text(doc: Document) -> str:
    return orjson.dumps(doc.data(), option=orjson.OPT_INDENT_2).decode() + "\n"


def to_csv_text(doc: Document) -> str:
    if doc.csv is None:
        raise ValueError("this document has no CSV form")
    return doc.csv()


def to_plain(doc: Document) -> str:
    """Plain text for pipes and files: blocks separated by a blank line."""
    parts = [text_lines(list(doc.head))] if doc.head else []
    for s in doc.sections:
        body = to_text(s.body) if isinstance(s.body, Table) else text_lines(list(s.body.lines))
        body = body.rstrip("\n") + "\n"
        title = f"{text_lines([s.title])}\n" if s.title is not None else ""
        note = f"{text_lines([s.note])}\n" if s.note is not None else ""
        parts.append(title + body + note)
    if doc.foot:
        parts.append(text_lines(list(doc.foot)) + "\n")
    parts += [f"{text_lines([heading])}\n{to_plain(part)}" for heading, part in doc.parts]
    return "\n\n".join(p.rstrip("\n") for p in parts) + "\n"


def to_md(doc: Document) -> str:
    """Markdown: the title in bold, the header as a list, titled sections as ### headings,
    tables as tables; the footer's first line, then the others as a list."""
    parts = [f"**{markdown_text(doc.title)}**"] if doc.title is not None else []
    if doc.head:
        parts.append(markdown_list(list(doc.head)))
    for s in doc.sections:
        if isinstance(s.body, Table):
            body = to_markdown(s.body)
        elif s.body.aligned:
            body = "```\n" + text_lines(list(s.body.lines)) + "\n```\n"
        else:
            body = markdown_list(list(s.body.lines)) + "\n"
        title = f"### {markdown_text(s.title)}\n\n" if s.title is not None else ""
        note = f"\n{markdown_text(s.note)}\n" if s.note is not None else ""
        parts.append(title + body + note)
    if doc.foot:  # a verdict, and what it is made of as a list
        parts.append(markdown_text(doc.foot[0]) + "\n")
    if len(doc.foot) > 1:
        parts.append(markdown_list([line.strip() for line in doc.foot[1:]]))
    parts += [f"## {markdown_text(heading)}\n\n{to_md(part)}" for heading, part in doc.parts]
    return "\n\n".join(p.rstrip("\n") for p in parts) + "\n"


def print_rich(doc: Document, console: Console) -> None:
    """A terminal: tables fitted to its width, titles in bold."""
    for line in doc.head:
        print_line(console, line)
    for s in doc.sections:
        if s.title is not None:
            console.print()
            print_line(console, s.title, style="bold")
        if isinstance(s.body, Table):
            to_rich(s.body, console, drop_order=s.drop_order)
        else:
            for line in s.body.lines:
                print_line(console, line)
        if s.note is not None:
            print_line(console, s.note)
    if doc.foot:
        last = doc.sections[-1] if doc.sections else None
        if last is not None and not (isinstance(last.body, Table) and last.note is None):
            console.print()  # a rich table ends with a blank line of its own
        for line in doc.foot:
            print_line(console, line, doc.foot_style)
    for heading, part in doc.parts:
        console.print()
        print_line(console, heading, style="bold")
        print_rich(part, console)


# The formats that produce text; "table" is rich on a terminal, else plain text.
RENDERERS: dict[str, Callable[[Document], str]] = {
    "json": to_json_text,
    "csv": to_csv_text,
    "md": to_md,
    "text": to_plain,
}
