"""Readable short names for kernels: the qualified function name of a C++ signature.

``void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)`` becomes
``at::native::vectorized_elementwise_kernel``; names that are not signatures
(``ampere_sgemm_128x64_tn``, ``Memcpy HtoD (Pageable -> Device)``) stay as they are.
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=65536)
def short_name(name: str) -> str:
    """The qualified function name of a kernel signature, or the name unchanged."""
    bare = _without_templates(name)
    if bare is None:
        return name
    function = _function_name(bare)
    if function is not None:
        return function
    return bare.strip() if bare != name else name


def _without_templates(name: str) -> str | None:
    """The name with every <...> removed; None if the angle brackets do not balance."""
    out: list[str] = []
    depth = 0
    for i, ch in enumerate(name):
        if ch == "<" and not name.startswith("operator", max(0, i - 8)):
            depth += 1
        elif ch == ">" and depth and name[i - 1 : i] != "-":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out) if depth == 0 else None


def _function_name(text: str) -> str | None:
    """``ns::f`` from ``[void|type] ns::f(args) [const]``; None if ``text`` is no call."""
    text = text.rstrip().removesuffix(" const").rstrip()
    if not text.endswith(")"):
        return None
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(text[i], 0)
        if depth == 0:
            head = text[:i]
            break
    else:
        return None
    if not head or head[-1] in " (":
        return None
    tokens = _top_level_tokens(head.removeprefix("void "))
    if len(tokens) == 1 or "::" in tokens[-1]:  # one word, or a return type then ns::name
        return tokens[-1]
    return None  # prose with a parenthesised remark, e.g. "Memcpy HtoD (Pageable -> Device)"


def _top_level_tokens(text: str) -> list[str]:
    """Split ``text`` at spaces that are not inside parentheses."""
    tokens: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == " " and depth == 0:
            if current:
                tokens.append("".join(current))
            current = []
        else:
            current.append(ch)
    if current:
        tokens.append("".join(current))
    return tokens
