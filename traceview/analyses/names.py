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
    call = _split_call(bare)
    if call is None:
        return bare.strip() if bare != name else name
    head = call.removeprefix("void ").strip()
    tokens = _top_level_tokens(head)
    return tokens[-1] if tokens else name


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


def _split_call(name: str) -> str | None:
    """The part before a trailing argument list ``(...)`` that follows a name, else None."""
    text = name.rstrip()
    if text.endswith(" const"):
        text = text[:-6].rstrip()
    if not text.endswith(")"):
        return None
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(text[i], 0)
        if depth == 0:
            head = text[:i]
            if not head or head[-1] in " (":
                return None
            return (
                head if " " not in _top_level(head.removeprefix("void ")) or _is_cpp(head) else None
            )
    return None


def _is_cpp(head: str) -> bool:
    """Whether a head with spaces still reads as ``return-type qualified::name``."""
    return "::" in _top_level_tokens(head)[-1] if _top_level_tokens(head) else False


def _top_level(text: str) -> str:
    """``text`` with parenthesised parts blanked out."""
    out, depth = [], 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        out.append(ch if depth == 0 and ch != ")" else "_")
    return "".join(out)


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
