"""Readable short names for kernels: the qualified function name of a C++ signature.

``void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)`` becomes
``at::native::vectorized_elementwise_kernel``; names that are not signatures
(``ampere_sgemm_128x64_tn``, ``Memcpy HtoD (Pageable -> Device)``) stay as they are.
AMD Tensile/hipBLASLt kernels (``Cijk_Alik_Bljk_HHS_BH_MT128x128x64_MI32x32x8_…``, ~800
characters) are their family and macro tile: ``Cijk_Alik_Bljk_HHS_BH MT128x128x64``.
Itanium-mangled names (``_ZN7ck_tile…``) are demangled first, by cpp_demangle when it is
installed; without it, or when a name does not parse, they stay as they are.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import lru_cache

import numpy as np

from traceview.columns.packed_names import PackedNames, subset

_demangle: Callable[[str], str] | None
try:
    import cpp_demangle

    _demangle = cpp_demangle.demangle
except ImportError:  # the documented fallback: mangled names are shown as recorded
    _demangle = None

_ANGLES = re.compile(r"[<>]")
_INNERMOST = re.compile(r"<[^<>]*>")
_NESTED = re.compile(r"<(?:[^<>]++|<(?:[^<>]++|<[^<>]*+>)*+>)*+>")  # up to 3 deep, at once
_PARENS = re.compile(r"[()]")
_PARENS_SPACES = re.compile(r"[() ]")
_TENSILE = re.compile(r"(Cijk_\w*?)_(MT\d+x\d+x\d+)(?:_|$)")  # family, macro tile
_MAX_GROWTH = 16  # a demangled name longer than this many times its mangled one is refused


def demangled(name: str) -> str:
    """``name`` demangled if it is an Itanium C++ mangled name (``_Z…``), else unchanged
    (such names are not kept in the cache: a million of them would hold ~100 MB)."""
    if _demangle is None or not name.startswith("_Z"):
        return name
    return _demangled(name)


@lru_cache(maxsize=65536)
def _demangled(name: str) -> str:
    assert _demangle is not None
    try:
        text = _demangle(name)
    except ValueError:  # not well-formed, or too deep: cpp_demangle's one error
        return name
    return text if len(text) <= _MAX_GROWTH * len(name) else name


@lru_cache(maxsize=65536)
def short_name(name: str) -> str:
    """The qualified function name of a kernel signature, or the name unchanged."""
    return _short_name(name)


def short_names(names: Iterable[str]) -> list[str]:
    """``short_name`` of many distinct names, past the cache (which cannot help them)."""
    return [_short_name(n) for n in names]


def _short_name(name: str) -> str:
    function = _plain_call(name)
    return _general_short_name(name) if function is None else function


def _general_short_name(name: str) -> str:
    name = demangled(name)
    tensile = _TENSILE.match(name) if name.startswith("Cijk_") else None
    if tensile:
        return f"{tensile[1]} {tensile[2]}"
    bare = _without_templates(name)
    if bare is None:
        return name
    function = _function_name(bare)
    if function is not None:
        return function
    return bare.strip() if bare != name else name


def _plain_call(name: str) -> str | None:
    """``f`` of the common shape ``[void ]f[<…>](…)``, found with a few string searches (the
    general path takes ~1.7 µs a name, seconds at 10^6 names); None if ``name`` is not
    surely of that shape, and the general path decides.

    Of that shape: ``f`` has no space, parenthesis or angle bracket and is followed by one
    balanced ``<…>`` (or none) and the parameters; the only parentheses are the call's, the
    brackets in the parameters balance, and the name is no operator, arrow, mangled or
    Tensile name. The general path then removes the brackets and takes ``f``.
    """
    if not name.endswith(")") or "operator" in name or "->" in name:
        return None
    start = 5 if name.startswith("void ") else 0
    call = name.find("(")
    less = name.find("<", start, call)
    function = name[start : call if less < 0 else less]
    if not function or " " in function or function.startswith(("_Z", "Cijk_")):
        return None
    if less >= 0 and name[call - 1] != ">":
        return None
    brackets = name.encode(*_UTF8).translate(None, _NOT_BRACKETS)
    return function if _is_call_skeleton(brackets) else None


_UTF8 = ("utf-8", "surrogatepass")  # any str encodes; '<>()' stay single bytes
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"<>()")))


@lru_cache(maxsize=4096)
def _is_call_skeleton(brackets: bytes) -> bool:
    """Whether a name's ``<>()`` characters, in order, are one balanced group or none, then
    ``(``, balanced groups, ``)``, with no other parenthesis (few names share many shapes)."""
    head, paren, tail = brackets.partition(b"(")
    if not paren or b")" in head or b"(" in tail:
        return False
    if tail.count(b")") != 1 or not tail.endswith(b")"):
        return False
    depths = _depths(head)  # one group: back to zero at its end only
    if depths and (depths[-1] != 0 or min(depths[:-1], default=1) <= 0):
        return False
    return _depths_ok(tail[:-1])


def _depths(brackets: bytes) -> list[int]:
    """The bracket depth after each of ``brackets`` (``<`` and ``>`` only)."""
    depth, out = 0, []
    for b in brackets:
        depth += 1 if b == 0x3C else -1
        out.append(depth)
    return out


def _depths_ok(brackets: bytes) -> bool:
    """Balanced: the depth never below zero and zero at the end."""
    depths = _depths(brackets)
    return min(depths, default=0) >= 0 and depths[-1:] in ([], [0])


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
    text, removed = _NESTED.subn("", name)  # most names nest no deeper than three
    while removed and "<" in text:
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


def display_names_in_order(names: Sequence[str]) -> Sequence[str]:
    """``display_names`` of every one of the distinct ``names``, in their order, packed (an
    output of every row: a dict of 10^6 display names would hold ~250 MB)."""
    display = display_names(names)
    if not isinstance(display, _Display):
        return PackedNames.of(display[name] for name in names)
    shown = display.in_order()
    del display
    return shown


def display_names(names: Sequence[str]) -> Mapping[str, str]:
    """The name to show for each distinct name: its short name, unless other names share it;
    then the short name with the template arguments that tell them apart, or ``#k`` (k by
    full name) when those do not. Decided over all ``names``, so the same whatever is shown.
    Linear, and light on memory: a hash of each short name is kept, not the short names;
    only colliding groups look further, each when one of its names is first asked for (a
    table shows a few of a million names)."""
    hashes, lookalike = _short_hashes(names)
    lazy = _Display(names, hashes)
    if lookalike:  # hostile shapes: compare all
        return _unique({name: lazy[name] for name in dict.fromkeys(names)})
    return lazy


def _short_hashes(names: Sequence[str]) -> tuple[np.ndarray, bool]:
    """The hash of the short name of each of ``names``, and whether any short name is a
    lookalike."""
    lookalike = False

    def hashes() -> Iterator[int]:
        nonlocal lookalike
        for name in subset(names, np.arange(len(names))):
            short = _plain_call(name)  # no '<' or ' ' in it
            if short is None:
                short = _general_short_name(name)
                lookalike = lookalike or _LOOKALIKE.search(short) is not None
            elif "#" in short:
                lookalike = True
            yield hash(short)

    return np.fromiter(hashes(), dtype=np.int64, count=len(names)), lookalike


# A short name that could equal another group's told-apart form (``k<1>``, ``k #2``,
# ``Cijk_… MT64x64x8``); with none, names of different groups can never show alike.
_LOOKALIKE = re.compile(r"[<# ]")


class _Display(Mapping[str, str]):
    """Display names, each colliding group worked out the first time one of its names is
    asked for. Names whose short names hash alike are found by a binary search in the
    sorted hashes, then compared by their short names themselves."""

    def __init__(self, names: Sequence[str], hashes: np.ndarray) -> None:
        self._names = names
        self._order = np.argsort(hashes, kind="stable")
        self._sorted = hashes[self._order]
        self._shown: dict[str, str] = {}

    def __getitem__(self, name: str) -> str:
        if name not in self._shown:
            short = _short_name(name)
            key = hash(short)
            lo = int(np.searchsorted(self._sorted, key, side="left"))
            hi = int(np.searchsorted(self._sorted, key, side="right"))
            members = {self._names[i] for i in self._order[lo:hi].tolist()}
            same = sorted(m for m in members if _short_name(m) == short)
            if len(same) <= 1:
                self._shown[name] = short
            else:
                self._shown.update(_told_apart(short, same))
        return self._shown[name]

    def in_order(self) -> Sequence[str]:
        """The display name of each of the names, in their order: every group worked out
        once, in the order of the hashes, packed in that order, without a str kept per
        name."""
        n = len(self._sorted)
        last = np.ones(n, dtype=bool)  # the last name of a run of equal hashes
        last[:-1] = self._sorted[1:] != self._sorted[:-1]
        data, lengths = self._packed_runs(last)
        ends = np.cumsum(lengths)
        del lengths
        where = np.empty(n, dtype=np.int64)  # where each name's display name is
        where[self._order] = np.arange(n)
        return subset(PackedNames(data, ends), where)

    def _packed_runs(self, last: np.ndarray) -> tuple[bytearray, np.ndarray]:
        """The display names, in hash order (UTF-8, one after another, and their lengths)."""
        data = bytearray()
        lengths: list[int] = []
        run: list[str] = []  # the names of the current run
        for start in range(0, len(last), _IN_ORDER_CHUNK):
            end = min(start + _IN_ORDER_CHUNK, len(last))
            shown: list[bytes] = []
            names = subset(self._names, self._order[start:end])
            for name, ends_run in zip(names, last[start:end].tolist(), strict=True):
                run.append(name)
                if ends_run:
                    shown += (s.encode(*_UTF8) for s in _run_display(run))
                    run.clear()
            lengths += map(len, shown)
            data += b"".join(shown)
        return data, np.array(lengths, dtype=np.int64)

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(self._names))

    def __len__(self) -> int:
        return len(set(self._names))


_IN_ORDER_CHUNK = 1 << 16  # names decoded at once by ``in_order``


def _run_display(run: list[str]) -> list[str]:
    """The display names of ``run``, names whose short names hash alike (as ``_Display``
    gives them: alone, a short name; sharing it, told apart)."""
    shorts = [_short_name(name) for name in run]
    if len(run) == 1:
        return shorts
    by_short: dict[str, list[str]] = {}
    for name, short in zip(run, shorts, strict=True):
        by_short.setdefault(short, []).append(name)
    told: dict[str, str] = {}
    for short, same in by_short.items():
        if len(same) > 1:
            told.update(_told_apart(short, sorted(set(same))))
    return [told.get(name, short) for name, short in zip(run, shorts, strict=True)]


_QUALIFIER = re.compile(r"\b(?:[A-Za-z_]\w*::)+")
_ANONYMOUS = re.compile(r"\(anonymous namespace\)::")
_LAMBDA_SCOPE = re.compile(  # f(params)::{lambda()#2}::operator()() const::…{lambda(x)#1}
    r"\((?:[^()]|\([^()]*\))*\)(?:::\{lambda\(\)#\d+\}::operator\(\)\(\) const)*::"
    r"(\{lambda\([^{}]*\)#\d+\})"
)
_LAMBDA_DEPTH = 4  # lambdas in template arguments of lambdas' functions, shortened inside out
_MAX_ARGS = 120  # characters of template arguments shown; beyond, ``#k``
_MAX_SINGLES = 16  # differing arguments tried alone (a bound on the work per group)
_MAX_PAIRS = 8  # differing arguments up to which pairs of them are tried


def _told_apart(short: str, members: list[str]) -> dict[str, str]:
    """Display names of the (sorted) distinct names that share ``short``: the fewest
    differing template arguments that tell them apart, else ``#k``."""
    tensile = short.startswith("Cijk_")
    if tensile:
        args = [_tensile_tokens(n) for n in members]
    else:  # made brief only where they differ: the others are never shown
        args = [_template_args(demangled(n), short) for n in members]
        args = _briefed(args, _differing(args))
    for chosen in _choices(_differing(args)):
        kept = [_kept(a, chosen, " " if tensile else ", ") for a in args]
        if len(set(kept)) == len(members) and max(map(len, kept)) <= _MAX_ARGS:
            form = "{} {}" if tensile else "{}<{}>"
            return {name: form.format(short, k) for name, k in zip(members, kept, strict=True)}
    return {name: f"{short} #{k}" for k, name in enumerate(members, 1)}


def _briefed(args: list[list[str]], positions: list[int]) -> list[list[str]]:
    """``args`` with the arguments at ``positions`` made brief (arguments alike in every
    list stay alike brief, and a told-apart name shows only differing ones)."""
    out = []
    for written in args:
        brief = written.copy()
        for i in positions:
            if i < len(brief):
                brief[i] = _brief(brief[i])
        out.append(brief)
    return out


def _tensile_tokens(name: str) -> list[str]:
    """The ``_``-separated parameters after a Tensile name's macro tile."""
    tile = _TENSILE.match(name)
    return name[tile.end() :].split("_") if tile else []


def _kept(args: list[str], chosen: list[int], sep: str) -> str:
    """The ``chosen`` arguments, ``…`` for each run of the others: ``…, 1024, 6, …``."""
    wanted = set(chosen)
    out: list[str] = []
    for i, arg in enumerate(args):
        if i in wanted:
            out.append(arg)
        elif not out or out[-1] != "…":
            out.append("…")
    return sep.join(out)


def _differing(args: list[list[str]]) -> list[int]:
    """Positions whose argument is not the same in every list (missing counts as differing);
    linear: only the positions all lists have are compared."""
    common = min(len(a) for a in args)
    same = [i for i in range(common) if len({a[i] for a in args}) == 1]
    return sorted(set(range(max(len(a) for a in args))) - set(same))


def _choices(differ: list[int]) -> list[list[int]]:
    """Sets of argument positions to try, fewest first."""
    singles = [[i] for i in differ[:_MAX_SINGLES]]
    pairs = [[i, j] for i in differ for j in differ if i < j] if len(differ) <= _MAX_PAIRS else []
    return [*singles, *pairs, differ] if differ else []


def _brief(arg: str) -> str:
    """A template argument without namespaces; a lambda as its function and its signature:
    ``ns::f(int)::{lambda()#2}::operator()() const::{lambda(float)#1}``
    → ``f()::{lambda(float)#1}``."""
    if "::" not in arg:  # no namespace, anonymous one or lambda scope to remove
        return arg.replace(" >", ">").strip()
    arg = _ANONYMOUS.sub("", arg)
    for _ in range(_LAMBDA_DEPTH):
        shorter = _LAMBDA_SCOPE.sub(r"()::\1", arg)
        if shorter == arg:
            break
        arg = shorter
    return _QUALIFIER.sub("", arg).replace(" >", ">").strip()


def _template_args(name: str, short: str) -> list[str]:
    """The top-level template arguments right after ``short`` in ``name`` ([] if none)."""
    start = name.find(short + "<")
    if start < 0:
        return []
    args: list[str] = []
    depth = 0
    begin = start + len(short) + 1
    for m in _ARG_MARKS.finditer(name, begin - 1):
        ch, i = m.group(), m.start()
        if ch in "<(" and not (ch == "<" and name.startswith("operator", max(0, i - 8))):
            depth += 1
        elif ch in ">)" and not (ch == ">" and name[i - 1 : i] == "-"):
            depth -= 1
            if depth == 0:
                return [*args, name[begin:i].strip()]
        elif ch == "," and depth == 1:
            args.append(name[begin:i].strip())
            begin = i + 1
    return []


_ARG_MARKS = re.compile(r"[<>(),]")


def _unique(shown: dict[str, str]) -> dict[str, str]:
    """Hostile names can still meet (a kernel literally called ``k #2``): those show in full."""
    seen: dict[str, int] = {}
    for display in shown.values():
        seen[display] = seen.get(display, 0) + 1
    return {name: name if seen[d] > 1 else d for name, d in shown.items()}
