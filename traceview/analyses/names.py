"""Readable short names for kernels: the qualified function name of a C++ signature.

``void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)`` becomes
``at::native::vectorized_elementwise_kernel``; names that are not signatures
(``ampere_sgemm_128x64_tn``, ``Memcpy HtoD (Pageable -> Device)``) stay as they are.
"""

from __future__ import annotations

import re
from functools import lru_cache

_ANGLES = re.compile(r"[<>]")
_INNERMOST = re.compile(r"<[^<>]*>")
_PARENS = re.compile(r"[()]")
_PARENS_SPACES = re.compile(r"[() ]")


@lru_cache(maxsize=65536)
def short_name(name: str) -> str:
    """The qualified function name of a kernel signature, or the name unchanged."""
    return _short_name(name)


def short_names(names: list[str]) -> list[str]:
    """``short_name`` of many distinct names, past the cache (which cannot help them)."""
    return [_short_name(n) for n in names]


def _short_name(name: str) -> str:
    bare = _without_templates(name)
    if bare is None:
        return name
    function = _function_name(bare)
    if function is not None:
        return function
    return bare.strip() if bare != name else name


def _without_templates(name: str) -> str | None:
    """The name with every <...> removed; None if the angle brackets do not balance.

    A ``>`` that closes nothing is kept. Innermost ``<...>`` are removed by a regex, one
    pass per nesting level (10^6 distinct names cost seconds with a Python step per
    character); ``operator<`` and ``->`` take the bracket-by-bracket path.
    """
    if "<" not in name:
        return name
    if "operator" in name or "->" in name:
        return _without_templates_each(name)
    text, removed = _INNERMOST.subn("", name)
    while removed:
        text, removed = _INNERMOST.subn("", text)
    return None if "<" in text else text


def _without_templates_each(name: str) -> str | None:
    """``_without_templates`` visiting each angle bracket: ``<`` after ``operator`` and ``>``
    after ``-`` are text, not brackets."""
    out: list[str] = []
    depth = 0
    kept_from = 0  # start of the depth-0 text not yet copied
    for m in _ANGLES.finditer(name):
        i = m.start()
        if m.group() == "<" and not name.startswith("operator", max(0, i - 8)):
            if depth == 0:
                out.append(name[kept_from:i])
            depth += 1
        elif m.group() == ">" and depth and name[i - 1 : i] != "-":
            depth -= 1
            if depth == 0:
                kept_from = i + 1
    if depth:
        return None
    out.append(name[kept_from:])
    return "".join(out)


def _function_name(text: str) -> str | None:
    """``ns::f`` from ``[void|type] ns::f(args) [const]``; None if ``text`` is no call."""
    text = text.rstrip().removesuffix(" const").rstrip()
    if not text.endswith(")"):
        return None
    head = _before_call(text)
    if not head or head[-1] in " (":
        return None
    tokens = _top_level_tokens(head.removeprefix("void "))
    if len(tokens) == 1 or "::" in tokens[-1]:  # one word, or a return type then ns::name
        return tokens[-1]
    return None  # prose with a parenthesised remark, e.g. "Memcpy HtoD (Pageable -> Device)"


def _before_call(text: str) -> str | None:
    """The text before the ``(`` that matches the final ``)``; None if there is none."""
    last_open = text.rfind("(")
    if last_open >= 0 and text.find(")", last_open, len(text) - 1) < 0:
        return text[:last_open]  # no parentheses inside the arguments: the usual case
    depth = 0
    for m in reversed(list(_PARENS.finditer(text))):
        depth += 1 if m.group() == ")" else -1
        if depth == 0:
            return text[: m.start()]
    return None


def _top_level_tokens(text: str) -> list[str]:
    """Split ``text`` at spaces that are not inside parentheses."""
    if "(" not in text and ")" not in text:
        return [t for t in text.split(" ") if t]
    tokens: list[str] = []
    depth = 0
    start = 0
    for m in _PARENS_SPACES.finditer(text):
        ch = m.group()
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0:
            if m.start() > start:
                tokens.append(text[start : m.start()])
            start = m.start() + 1
    if len(text) > start:
        tokens.append(text[start:])
    return tokens
