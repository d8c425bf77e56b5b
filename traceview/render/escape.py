"""Every name is data: how text from a trace (names, paths, messages) is shown in each output.

Control and format characters (ESC, BEL, CR, NUL, C1, bidi overrides, zero-width marks, line
separators, lone surrogates) are shown as escapes such as ``\\x1b`` or ``\\u202e``; rich gets
``Text`` objects, never markup; Markdown and CSV cells are escaped for their readers. JSON
keeps the real strings (it escapes by itself), so it is not handled here.
"""

from __future__ import annotations

import re
import unicodedata
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

# Cc control, Cf format (bidi, zero-width, BOM), Cs lone surrogate, Zl/Zp line/paragraph break.
_ESCAPED = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_MARKDOWN = str.maketrans(
    {c: "\\" + c for c in "\\`*[]|~$"} | {"<": "&lt;", ">": "&gt;", "&": "&amp;"}
)
# An underscore between two letters or digits can neither open nor close emphasis
# (snake_case_kernel stays readable); any other one is escaped (__init__, _x_).
_MARKDOWN_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def visible(text: str) -> str:
    """``text`` with every control or format character written as a backslash escape."""
    if text.isprintable():  # the common case, at C speed (non-ASCII spaces take the slow path)
        return text
    return "".join(_escape(c) if unicodedata.category(c) in _ESCAPED else c for c in text)


def _escape(c: str) -> str:
    code = ord(c)
    if c in _SHORT:
        return _SHORT[c]
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def text_lines(lines: list[str]) -> str:
    """Lines for plain text: each shown visibly, so a newline in a name never starts a line."""
    return "\n".join(visible(line) for line in lines)


def rich_text(text: str, style: str | None = None) -> Text:
    """A rich ``Text``: never read as markup (``[bold]``, ``[link=...]``) nor as ``:emoji:``."""
    from rich.text import Text

    return Text(visible(text), style=style or "")


def print_line(console: Console, line: str, style: str | None = None) -> None:
    """Print one line of a report on a rich console, exactly as written; wider than the
    console, its value goes on under itself (a hanging indent, not back to column 0)."""
    from traceview.render.wrap import hanging

    if console.soft_wrap:  # not a terminal: one line, however long
        console.print(rich_text(line, style))
        return
    for part in hanging(visible(line), console.width):
        console.print(rich_text(part, style), overflow="fold")


def markdown_text(text: str) -> str:
    """Markdown inline text: no table break (``|``), no HTML, no emphasis, code or links."""
    escaped = visible(text).translate(_MARKDOWN)
    return _MARKDOWN_UNDERSCORE.sub(r"\\_", escaped) if "_" in escaped else escaped


def markdown_list(lines: list[str]) -> str:
    """Lines as a Markdown bullet list."""
    return "\n".join(f"- {markdown_text(line)}" for line in lines)


def csv_cell(value: object) -> object:
    """A CSV value: numbers as they are; text visible and, when a spreadsheet would read it as
    a formula (``=``, ``+``, ``-``, ``@``, tab, CR first), prefixed with ``'``."""
    if not isinstance(value, str):
        return value
    shown = visible(value)
    return "'" + shown if value.startswith(_FORMULA_START) else shown


_HTML = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"})
# Inside <script>, "</script>" or "<!--" would end or change the element whatever the JSON
# means, and U+2028/2029 end a line in older JavaScript: written as JSON escapes instead.
_SCRIPT_JSON = {b"<": b"\\u003c", b">": b"\\u003e", b"&": b"\\u0026"}
_SCRIPT_LINES = {"\u2028": "\\u2028", "\u2029": "\\u2029"}


def html_text(text: str) -> str:
    """HTML text or attribute value: visible, with ``& < > " '`` as character references."""
    return visible(text).translate(_HTML)


_PLOTLY = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def plotly_text(text: str) -> str:
    """A string plotly draws (a tick, a legend, a hover label): visible, with only ``& < >``
    as references. Plotly reads its own tags and a few entities (not ``&quot;`` or
    ``&#39;``, which it would show as written); the string reaches it as JSON data."""
    return visible(text).translate(_PLOTLY)


def script_json(value: object) -> str:
    """``value`` as JSON safe to put inside a ``<script>`` element: no ``<``, ``>``, ``&``
    and no U+2028/U+2029 left as such (each written as its ``\\u`` escape)."""
    import orjson

    raw = orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)
    for byte, byte_escape in _SCRIPT_JSON.items():
        raw = raw.replace(byte, byte_escape)
    text = raw.decode()
    for char, char_escape in _SCRIPT_LINES.items():
        text = text.replace(char, char_escape)
    return text
