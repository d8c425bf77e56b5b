"""The report model: every command's result as one document, rendered by generic renderers.

A command turns its typed result into a ``Document``: header lines, sections (a table or lines,
each with an optional title and note), footer lines, and the two machine-readable forms, its
JSON document and its CSV. The renderers below know nothing of any command, so the terminal,
text, Markdown, CSV and JSON outputs all show the same notes and the same "left out" facts,
and a new format (HTML) is one more renderer in ``RENDERERS``.

Each renderer gives its text a chunk at a time: a document of every kernel of a trace with
10^6 names (a 250 MB CSV) is written as its rows are made, never held whole (a table's rows
from ``tables.each_row``, a JSON list from ``analyses.streamed.json_list``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from traceview.analyses.core.streamed import Each
from traceview.render.escape import markdown_list, markdown_text, print_line, text_lines
from traceview.render.tables import Table, batched, markdown_chunks, text_chunks, to_rich

_ITEMS_AT_ONCE = 1 << 12  # items of a streamed JSON list written as one chunk

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
    ``csv`` the CSV text (raw numbers, one row per item of the main table), or its chunks,
    None for a command without a CSV form (its --format check refuses csv before the trace
    is read)."""

    head: Sequence[str]
    sections: Sequence[Section]
    data: Callable[[], dict[str, Any]]
    csv: Callable[[], str | Iterator[str]] | None
    foot: Sequence[str] = field(default_factory=tuple)
    # The footer's style on a terminal (a verdict in green or red); a Markdown document's first
    # line, in bold (a review comment's headline).
    foot_style: str | None = None
    title: str | None = None
    # Documents shown after this one, each under its heading (a run's ranks, one by one).
    parts: Sequence[tuple[str, Document]] = field(default_factory=tuple)


def to_json_text(doc: Document) -> str:
    return "".join(json_chunks(doc))


def json_chunks(doc: Document) -> Iterator[str]:
    """The JSON document, indented by 2 as ``orjson.OPT_INDENT_2`` writes it (to the byte),
    with each ``Each`` list written a chunk of items at a time."""
    yield from _json_chunks(doc.data(), "")
    yield "\n"


def _json_chunks(value: Any, indent: str) -> Iterator[str]:
    inner = indent + "  "
    if isinstance(value, Each):
        opened = False
        for items in batched(value, _ITEMS_AT_ONCE):
            yield (",\n" if opened else "[\n") + ",\n".join(
                inner + "".join(_json_chunks(v, inner)) for v in items
            )
            opened = True
        yield f"\n{indent}]" if opened else "[]"
    elif isinstance(value, dict) and _streams(value):
        yield "{"
        for k, (key, item) in enumerate(value.items()):
            yield f"{',' if k else ''}\n{inner}{orjson.dumps(key).decode()}: "
            yield from _json_chunks(item, inner)
        yield f"\n{indent}}}"
    elif isinstance(value, list) and _streams(value):
        yield "["
        for k, item in enumerate(value):
            yield f"{',' if k else ''}\n{inner}"
            yield from _json_chunks(item, inner)
        yield f"\n{indent}]"
    else:
        yield _dumps(value, indent)


def _dumps(value: Any, indent: str) -> str:
    """``value`` indented by 2, its lines after the first by ``indent`` more (a newline is
    always escaped inside a JSON string)."""
    text = orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
    return text.replace("\n", "\n" + indent) if indent else text


def _streams(value: Any) -> bool:
    """Whether an ``Each`` is in ``value``."""
    if isinstance(value, Each):
        return True
    if isinstance(value, dict):
        return any(_streams(v) for v in value.values())
    return isinstance(value, list) and any(_streams(v) for v in value)


def to_csv_text(doc: Document) -> str:
    return "".join(csv_chunks(doc))


def csv_chunks(doc: Document) -> Iterator[str]:
    if doc.csv is None:
        raise ValueError("this document has no CSV form")
    text = doc.csv()
    if isinstance(text, str):
        yield text
    else:
        yield from text


def to_plain(doc: Document) -> str:
    """Plain text for pipes and files: blocks separated by a blank line."""
    return "".join(plain_chunks(doc))


def plain_chunks(doc: Document) -> Iterator[str]:
    """``to_plain``, a chunk at a time."""
    parts: list[Iterable[str]] = [[text_lines(list(doc.head))]] if doc.head else []
    for s in doc.sections:
        if isinstance(s.body, Table):
            body: Iterable[str] = text_chunks(s.body)
        else:
            body = [text_lines(list(s.body.lines))]
        title = f"{text_lines([s.title])}\n" if s.title is not None else ""
        note = f"{text_lines([s.note])}\n" if s.note is not None else ""
        parts.append(_section(title, body, note))
    if doc.foot:
        parts.append([text_lines(list(doc.foot)) + "\n"])
    parts += [
        itertools.chain([f"{text_lines([heading])}\n"], plain_chunks(part))
        for heading, part in doc.parts
    ]
    return _blocks(parts)


def to_md(doc: Document) -> str:
    """Markdown: the title in bold, the header as a list, titled sections as ### headings,
    tables as tables; the footer's first line, then the others as a list."""
    return "".join(md_chunks(doc))


def md_chunks(doc: Document) -> Iterator[str]:
    """``to_md``, a chunk at a time."""
    parts: list[Iterable[str]] = []
    if doc.title is not None:
        parts.append([f"**{markdown_text(doc.title)}**"])
    if doc.head:
        parts.append([markdown_list(list(doc.head))])
    for s in doc.sections:
        if isinstance(s.body, Table):
            body: Iterable[str] = markdown_chunks(s.body)
        elif s.body.aligned:
            body = ["```\n" + text_lines(list(s.body.lines)) + "\n```\n"]
        else:
            body = [markdown_list(list(s.body.lines)) + "\n"]
        title = f"### {markdown_text(s.title)}\n\n" if s.title is not None else ""
        note = f"\n{markdown_text(s.note)}\n" if s.note is not None else ""
        parts.append(itertools.chain([title], body, [note]))
    if doc.foot:  # a verdict, and what it is made of as a list
        parts.append([markdown_text(doc.foot[0]) + "\n"])
    if len(doc.foot) > 1:
        parts.append([markdown_list([line.strip() for line in doc.foot[1:]])])
    parts += [
        itertools.chain([f"## {markdown_text(heading)}\n\n"], md_chunks(part))
        for heading, part in doc.parts
    ]
    return _blocks(parts)


def _section(title: str, body: Iterable[str], note: str) -> Iterator[str]:
    """A text section's title, body (its trailing newlines made one) and note."""
    yield title
    yield from _rstripped(body)
    yield "\n" + note


def _blocks(parts: Iterable[Iterable[str]]) -> Iterator[str]:
    """The parts without their trailing newlines, a blank line between two, a newline at
    the end: ``"\\n\\n".join(p.rstrip("\\n") for p in parts) + "\\n"``, as chunks."""
    for k, part in enumerate(parts):
        if k:
            yield "\n\n"
        yield from _rstripped(part)
    yield "\n"


def _rstripped(chunks: Iterable[str]) -> Iterator[str]:
    """The text of ``chunks`` without its trailing newlines (held back until more follows)."""
    held = ""
    for chunk in chunks:
        text = held + chunk
        kept = text.rstrip("\n")
        if kept:
            yield kept
        held = text[len(kept) :]


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


# The formats that produce text, each as chunks; "table" is rich on a terminal, else text.
RENDERERS: dict[str, Callable[[Document], Iterator[str]]] = {
    "json": json_chunks,
    "csv": csv_chunks,
    "md": md_chunks,
    "text": plain_chunks,
}
