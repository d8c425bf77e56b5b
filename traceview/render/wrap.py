"""Text cut to a terminal's width: names in a table column (at most two lines, shortened in the
middle), report lines with a hanging indent. Only the terminal gets these: ``-o``, JSON and
CSV keep every name whole.

Lines break where a reader expects a name to part (after a space, ``::``, ``_``, ``<``, ``,``,
``(`` …), never inside a word (``backwar``/``d``), unless a word is longer than the line.
"""

from __future__ import annotations

import re

NAME_LINES = 2  # a name in a table takes at most this many lines
ELLIPSIS = "…"
# A line may end after one of these (and the next start with anything but a closer or a space).
_SEPARATORS = frozenset(" _:,;<>()[]{}/.-#*&|=+")
_NO_START = frozenset(" :,;)>]}…")
_UNIT = re.compile(r"(?:[nµum]?s|%|[KMGT]i?B|B|W|J)(?![^\W\d_])")
_HEAD_ENDS = frozenset(":_<., ]")  # a shortened name's start ends after one of these
# What a report line's value hangs under: its key (``trace    path``: a word, then two spaces or
# more), a number (``#1 at ts …``), or a continuation's indent and label (``         try: …``).
_KEY = re.compile(r"(?:[^\s]+(?: [^\s]+)? {2,}|#\d+ | +(?:[a-z]+: )?)(?=\S)")


def width_of(text: str) -> int:
    """Terminal cells ``text`` takes (a CJK character takes two)."""
    if text.isascii():
        return len(text)
    from rich.cells import cell_len

    return cell_len(text)


def _breaks(text: str) -> list[int]:
    """Positions where a line may break: after a separator, not before a closer or space,
    nor inside a number or between it and its unit (``1,234.5 ms``)."""
    return [
        i
        for i in range(1, len(text))
        if text[i - 1] in _SEPARATORS
        and text[i] not in _NO_START
        and not (i > 1 and text[i - 2].isdigit() and _joined(text, i))
    ]


def _joined(text: str, i: int) -> bool:
    """Whether a number (its last digit at ``i - 2``) goes on at ``i``: its decimals or
    thousands (``14.0``, ``1,234``), or its unit after a space (``14.0 ms``)."""
    if text[i - 1] == " ":
        return _UNIT.match(text, i) is not None
    return text[i - 1] in ".," and text[i].isdigit()


def _camel(text: str) -> list[int]:
    """Positions inside a word where a capitalised part starts (``Tensor|List``)."""
    return [
        i
        for i in range(1, len(text) - 1)
        if text[i].isupper() and text[i - 1].islower() and text[i + 1].islower()
    ]


def _cut(text: str, width: int, prose: bool) -> int:
    """Where the first line of ``text`` ends: the last break within ``width`` (in prose, a
    space's first; in a word, before a capital), else at ``width`` (a word too long)."""
    limit = _fitting(text, width)
    if limit >= len(text):
        return len(text)
    window = text[: limit + 8]  # a unit just past the limit still holds to its number
    breaks = [i for i in _breaks(window) if i <= limit]
    spaces = [i for i in breaks if text[i - 1] == " "] if prose else []
    camel = [i for i in _camel(window) if i <= limit]
    for kind, least in ((spaces, limit // 2), (breaks, limit // 3), (camel, limit // 3)):
        if kind and kind[-1] > least:
            return kind[-1]
    return max(limit, 1)


def _fitting(text: str, width: int) -> int:
    """How many characters of ``text`` fit in ``width`` cells."""
    if text.isascii():
        return min(len(text), width)
    n = 0
    while n < len(text) and width_of(text[: n + 1]) <= width:
        n += 1
    return n


def wrap(text: str, width: int, prose: bool = False) -> list[str]:
    """``text`` in lines of at most ``width`` cells, broken where names part (``prose``:
    between words first)."""
    width = max(width, 1)
    lines = []
    while width_of(text) > width:
        end = _cut(text, width, prose)
        lines.append(text[:end].rstrip() or text[:end])
        text = text[end:]
    return [*lines, text]


def fit_name(name: str, width: int, max_lines: int = NAME_LINES) -> list[str]:
    """``name`` in at most ``max_lines`` lines of ``width`` cells: wrapped where it parts, or,
    when longer, its start and as much of its end as fits, with ``…`` between (names alike
    at the start, template instantiations, differ at the end:
    ``cutlass::Kernel2<…bf16_128x128_tn_align1>``)."""
    lines = wrap(name, width)
    if len(lines) <= max_lines:
        return lines
    head = _head(name, width)
    rest = name[len(head) :]
    room = max_lines * width - width_of(head) - 1
    for i in sorted({*_breaks(rest), *_camel(rest)}):  # the longest end first
        if width_of(rest[i:]) < room // 2:
            break
        lines = wrap(head + ELLIPSIS + rest[i:], width)
        if len(lines) <= max_lines:
            return lines
    for n in range(min(room, len(rest)), 0, -1):  # no end starts where the name parts
        lines = wrap(head + ELLIPSIS + rest[-n:], width)
        if len(lines) <= max_lines:
            return lines
    return wrap(ELLIPSIS, width)


def _head(name: str, width: int) -> str:
    """The longest start of ``name`` within half of ``width`` cells that ends where the name
    parts (else its shortest such start within ``width`` less 4, else its first cells)."""
    ends = [i for i in _breaks(name) if name[i - 1] in _HEAD_ENDS]
    half = [i for i in ends if width_of(name[:i]) <= width // 2]
    if half:
        return name[: half[-1]]
    if ends and width_of(name[: ends[0]]) <= width - 4:
        return name[: ends[0]]
    return name[: _fitting(name, width // 2)]


def hanging(line: str, width: int) -> list[str]:
    """A report line (``key     value``, or a continuation indented as its value) wrapped
    within ``width`` with the lines after the first indented under the value."""
    if width_of(line) <= width:
        return [line]
    key = _KEY.match(line)
    indent = len(key.group()) if key and len(key.group()) <= width // 3 else 0
    lines = wrap(line[indent:], width - indent, prose=True)
    return [line[:indent] + lines[0], *(" " * indent + rest for rest in lines[1:])]
