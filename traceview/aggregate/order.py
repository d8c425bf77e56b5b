"""Sorting and grouping integer columns faster than the generic numpy calls, same results.

A trace's columns are small ids (names, streams) and ns times that are nearly in order, so
two keys packed into one int64 sort in one pass (timsort is near-linear on nearly sorted
data), and ids below a small bound group with a bincount instead of a sort.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np

_INT64_LIMIT = 1 << 63
_TABLE_MIN = 1 << 16  # a bincount table this large is always cheap
_PASS = 1 << 16  # rows a pass where a pass's temporary is enough


def packed(
    major: np.ndarray, minor: np.ndarray, rows: np.ndarray | None = None
) -> tuple[np.ndarray, int, int] | None:
    """``major << bits | (minor − low)`` as int64, ordered like (major, minor) pairs.

    ``major`` holds non-negative ids; returns the keys with ``bits`` and ``low`` (to unpack
    minor values), or None when the keys would not fit in 63 bits or a column is no int.
    ``rows``: the keys of those rows alone, made a pass at a time (neither column gathered).
    """
    n = len(minor) if rows is None else len(rows)
    if n == 0 or major.dtype.kind not in "iu" or minor.dtype != np.int64:
        return None
    (low, high), (least, most) = _int_range(minor, rows), _int_range(major, rows)
    bits = (high - low).bit_length()
    if least < 0 or (most + 1) << bits > _INT64_LIMIT:
        return None
    key = np.empty(n, dtype=np.int64)  # made a pass at a time, in place
    for lo in range(0, n, _PASS):
        at = slice(lo, lo + _PASS) if rows is None else rows[lo : lo + _PASS]
        part = key[lo : lo + _PASS]
        part[:] = major[at]
        part <<= bits
        part |= np.subtract(minor[at], low)
    return key, bits, low


def lex_order(keys: Sequence[np.ndarray]) -> np.ndarray:
    """The permutation ``np.lexsort(keys)`` gives (the last key is the primary one).

    The two primary keys are packed and sorted stably; only rows that tie on both are then
    ordered by the other keys, so the result is exactly lexsort's, ties in row order.
    """
    key = packed(keys[-1], keys[-2]) if len(keys) >= 2 else None
    if key is None:
        return np.lexsort(keys)
    others = keys[:-2]
    return _ordered([key[0]], (lambda rows: [k[rows] for k in others]) if others else None)


def lex_order_then(
    major: np.ndarray, minor: np.ndarray, ties: Callable[[np.ndarray], list[np.ndarray]]
) -> np.ndarray:
    """``lex_order((*ties(every row), minor, major))``, the tie keys asked for only at the
    rows that tie on (major, minor): a caller need not hold them for every row."""
    return lex_order_of([major, minor], ties)


def lex_order_of(
    columns: list[np.ndarray], ties: Callable[[np.ndarray], list[np.ndarray]]
) -> np.ndarray:
    """``lex_order_then`` of ``columns`` = [major, minor], a list this call empties: when the
    caller holds no other reference, each is freed once packed (arguments are held by the
    caller until the call returns)."""
    major, minor = columns
    columns.clear()
    key = packed(major, minor)
    if key is None:
        return np.lexsort((*ties(np.arange(len(major))), minor, major))
    del major, minor
    held = [key[0]]
    del key
    return _ordered(held, ties)


def lex_order_of_rows(
    major: np.ndarray,
    minor: np.ndarray,
    rows: np.ndarray,
    ties: Callable[[np.ndarray], list[np.ndarray]],
) -> np.ndarray:
    """``lex_order_of([major[rows], minor[rows]], ties)``, the packed keys made a pass of
    rows at a time (``packed``'s ``rows``): neither gathered column is made where they fit
    (12 B a row of int32 ids and int64 minors, beside the keys' 8)."""
    key = packed(major, minor, rows)
    if key is None:
        return lex_order_of([major[rows], minor[rows]], ties)
    return _ordered([key[0]], ties)


def _int_range(column: np.ndarray | None, rows: np.ndarray | None) -> tuple[int, int]:
    """The least and greatest of ``column`` (of its ``rows``: a pass at a time); (0, 0) for
    None."""
    if column is None:
        return 0, 0
    if rows is None:
        return int(column.min()), int(column.max())
    low, high = _INT64_LIMIT, -_INT64_LIMIT
    for lo in range(0, len(rows), _PASS):
        part = column[rows[lo : lo + _PASS]]
        low, high = min(low, int(part.min())), max(high, int(part.max()))
    return low, high


def _ordered(
    held: list[np.ndarray], ties: Callable[[np.ndarray], list[np.ndarray]] | None
) -> np.ndarray:
    """Rows in ``held[0]`` order (stable; the list emptied), those equal in it ordered by
    ``ties(rows)`` (lexsort's convention), then by row. The ties are found a pass at a
    time, without a sorted copy of the keys."""
    primary = held.pop()
    order = np.argsort(primary, kind="stable")
    if ties is None:
        return order
    n = len(order)
    in_run = np.zeros(n, dtype=bool)  # every position inside a run of equal keys
    for lo in range(0, n - 1, _PASS):
        hi = min(lo + _PASS, n - 1)
        key = primary[order[lo : hi + 1]]
        equal = key[1:] == key[:-1]
        in_run[lo:hi] |= equal
        in_run[lo + 1 : hi + 1] |= equal
    if not in_run.any():
        return order
    at = np.flatnonzero(in_run)
    del in_run
    rows = order[at]
    order[at] = rows[np.lexsort([*ties(rows), primary[rows]])]
    return order


def packed_order(
    major: np.ndarray | None,
    minor: np.ndarray,
    ties: Callable[[np.ndarray], list[np.ndarray]] | None = None,
    rows: np.ndarray | None = None,
) -> np.ndarray | None:
    """``lex_order((*ties(every row), minor, major))`` as int32 positions when they fit, in
    less memory: one int64 key a row, (major, minor − the least, position) packed, sorted in
    place (no int64 permutation beside it); rows tied on (major, minor) are then ordered by
    ``ties(positions)``, then by position (``major`` None: one group, by ``minor``). None
    when the key would not fit (``major`` not non-negative ints, ``minor`` not int64).
    ``rows``: of the columns' ``rows`` alone (positions among them), gathered a pass at a
    time (``packed_order(major[rows], minor[rows], ...)`` without those copies)."""
    n = count = len(minor) if rows is None else len(rows)
    if count == 0 or minor.dtype != np.int64:
        return None
    if major is not None and major.dtype.kind not in "iu":
        return None
    (low, high), (least, most) = _int_range(minor, rows), _int_range(major, rows)
    if least < 0:
        return None
    index_bits, minor_bits = n.bit_length(), (high - low).bit_length()
    majors = 1 if major is None else most + 1
    if majors << (minor_bits + index_bits) > _INT64_LIMIT:
        return None
    key = np.empty(count, dtype=np.int64)
    filled = 0
    for lo in range(0, n, _PASS):
        at = slice(lo, lo + _PASS) if rows is None else rows[lo : lo + _PASS]
        k = np.subtract(minor[at], low)
        if major is not None:
            k |= major[at].astype(np.int64) << minor_bits
        k <<= index_bits
        k |= np.arange(lo, lo + len(k))
        key[filled : filled + len(k)] = k
        filled += len(k)
    key.sort(kind="stable")  # timsort: near-sorted keys in a few runs
    # The positions are written over the key itself, a pass at a time (int32 ones into its
    # first half): a pass's keys are read before its positions land, below keys still to
    # be read; the second half is then given back. 8 B a row at most, not 12.
    narrow = n < 2**31
    into = key.view(np.int32) if narrow else key
    mask = (1 << index_bits) - 1
    in_run = np.zeros(count if ties is not None else 0, dtype=bool)
    for lo in range(0, count, _PASS):
        part = key[lo : lo + _PASS + 1]
        if ties is not None:
            upper = part >> index_bits
            equal = upper[1:] == upper[:-1]
            in_run[lo : lo + len(equal)] |= equal
            in_run[lo + 1 : lo + 1 + len(equal)] |= equal
        found = part[:_PASS] & mask  # made whole before it is written
        into[lo : lo + len(found)] = found
    del into, part, found
    if narrow:
        key.resize((count + 1) // 2, refcheck=False)  # no view of it is left
    out = key.view(np.int32)[:count] if narrow else key
    del key
    if ties is None or not in_run.any():
        return out
    runs = np.flatnonzero(in_run)
    del in_run
    tied = out[runs]
    # the tied rows are in (major, minor, position) order already: ordered within runs by the
    # ties, then position, with (major, minor) kept first
    of = tied if rows is None else rows[tied]  # their rows of the columns
    groups = [] if major is None else [major[of]]
    order = np.lexsort([tied, *ties(tied), minor[of], *groups])
    out[runs] = tied[order]
    return out


def dense_ids(keys: np.ndarray, bound: int, narrow: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys, return_inverse=True)`` for int keys in [0, bound), inverse as int64
    (``narrow``: int32 where every id fits, made so, not narrowed from an int64 copy).

    A mask over [0, bound) and a look-up table of the ids replace the sort when that table
    is small. Not a bincount: it counts in int64 (8 B for each of ``bound``) and casts int32
    keys to an int64 copy; the mask takes 1 B, and the table is made in ``dtype``.
    """
    dtype = np.int32 if narrow and bound < 2**31 else np.int64
    if bound > max(4 * len(keys), _TABLE_MIN):
        used, inverse = np.unique(keys, return_inverse=True)
        return used, inverse.reshape(-1).astype(dtype)
    if len(keys) and int(keys.min()) < 0:  # the mask would take it from the end
        raise ValueError("dense_ids: a negative key")
    present = np.zeros(bound, dtype=bool)
    present[keys] = True
    table = np.cumsum(present, dtype=dtype)
    np.subtract(table, 1, out=table)
    return np.flatnonzero(present), table[keys]


def groups_in_order(keys: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Rows grouped by equal values in every key column (int columns of one length): each
    group's first row, groups in order of their first row, and each row's group (an index
    into that list). A Python loop over the groups then visits them as one over the rows
    would first meet them."""
    n = len(keys[0]) if keys else 0
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = lex_order(keys)  # stable: within a group, rows in order
    starts = np.zeros(n, dtype=bool)
    starts[0] = True
    for key in keys:
        ordered = key[order]
        starts[1:] |= ordered[1:] != ordered[:-1]
    first = order[starts]  # each group's first row, in key order
    by_first = np.argsort(first, kind="stable")
    rank = np.empty(len(first), dtype=np.int64)
    rank[by_first] = np.arange(len(first))
    group = np.empty(n, dtype=np.int64)
    group[order] = rank[np.cumsum(starts) - 1]
    firsts: np.ndarray = first[by_first].astype(np.int64)
    return firsts, group


def concat_ranges(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The integers of every range [lo[i], hi[i]) one range after another, and for each the
    index i of its range: ``np.concatenate([np.arange(a, b) for a, b in ...])`` without a
    Python loop."""
    lo, hi = np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64)
    length = np.maximum(hi - lo, 0)
    owner = np.repeat(np.arange(len(lo)), length)
    start_of = np.cumsum(length) - length  # where each range begins in the output
    at = np.arange(int(length.sum()), dtype=np.int64)
    at += np.repeat(lo - start_of, length)  # one output-sized temporary, not three
    return at, owner


def searchsorted_pairs(
    major: np.ndarray,
    minor: np.ndarray,
    at_major: np.ndarray,
    at_minor: np.ndarray,
    side: Literal["left", "right"],
) -> np.ndarray:
    """``np.searchsorted`` over (major, minor) pairs sorted lexicographically, for the query
    pairs (at_major, at_minor). Majors are non-negative ids; pairs are packed into int64 keys
    with one layout for both sides when they fit, else compared as structured records."""
    both = [m for m in (minor, at_minor) if len(m)]
    if both and major.dtype.kind in "iu" and at_major.dtype.kind in "iu":
        low = min(int(m.min()) for m in both)
        bits = (max(int(m.max()) for m in both) - low).bit_length()
        top = max([int(a.max()) for a in (major, at_major) if len(a)] + [0])
        bottom = min([int(a.min()) for a in (major, at_major) if len(a)] + [0])
        if bottom >= 0 and (top + 1) << bits <= _INT64_LIMIT // 2:
            keys = [
                (a.astype(np.int64) << bits) | (m - low)
                for a, m in ((major, minor), (at_major, at_minor))
            ]
            packed_at: np.ndarray = np.searchsorted(keys[0], keys[1], side=side)
            return packed_at
    records, at_records = _records(major, minor), _records(at_major, at_minor)
    at: np.ndarray = np.searchsorted(records, at_records, side=side)
    return at


def _records(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.empty(len(a), dtype=[("a", "<i8"), ("b", "<i8")])
    out["a"], out["b"] = a, b
    return out


def fits_int32(values: np.ndarray) -> bool:
    """Whether every one of ``values`` (integers, at least one) fits in int32."""
    info = np.iinfo(np.int32)
    return info.min <= int(values.min()) and int(values.max()) <= info.max


def positions_where(mask: np.ndarray) -> np.ndarray:
    """``np.flatnonzero(mask)``, int32 where the column's positions fit: found a pass at a
    time, with no int64 array of every position (8 B each) on the way."""
    if len(mask) >= 2**31:
        return np.flatnonzero(mask)
    out = np.empty(int(np.count_nonzero(mask)), dtype=np.int32)
    at = 0
    for lo in range(0, len(mask), _PASS):
        found = np.flatnonzero(mask[lo : lo + _PASS])
        found += lo
        out[at : at + len(found)] = found
        at += len(found)
    return out


def ids_dtype(count: int) -> type[np.signedinteger[Any]]:
    """The dtype for ids in [−1, ``count``): int16 where they fit (a trace's threads,
    devices or op groups: 2 B a row where they are held per row), else int32."""
    return np.int16 if count <= np.iinfo(np.int16).max else np.int32


def narrowed(ids: np.ndarray) -> np.ndarray:
    """Integer ids, positions or counts as int32 where they all fit (half the memory), else
    as they are (narrower ones too)."""
    if ids.dtype in (np.int8, np.int16):
        return ids
    if len(ids) == 0 or ids.dtype == np.int32 or fits_int32(ids):
        return ids.astype(np.int32, copy=False)
    return ids


def first_of_runs(ordered: np.ndarray) -> np.ndarray:
    """Indices where a run of equal values starts in a sorted array (``np.unique``'s
    ``return_index`` without its import of numpy.ma)."""
    return np.flatnonzero(np.r_[len(ordered) > 0, ordered[1:] != ordered[:-1]])


_MARKED_RANGE = 4  # integers in [0, this many times their count) are marked, not sorted
_FEW_DESCENTS = 64  # under one descent in this many values: the sort that follows runs


def present(ids: np.ndarray, bound: int) -> np.ndarray:
    """The distinct ids in [0, bound) among ``ids`` (negative ones left out), ascending:
    marked a pass at a time (no index copy of every id)."""
    count = np.zeros(bound, dtype=np.int64)
    for lo in range(0, len(ids), _PASS):
        part = ids[lo : lo + _PASS]
        if len(part) and int(part.min()) < 0:
            part = part[part >= 0]
        count += np.bincount(part, minlength=bound)
    return np.flatnonzero(count)


def distinct(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values. Small integers (ids) are marked in a mask,
    not sorted (0.3 against 5 ms for 1.7·10^5 name ids); values in a few ascending runs
    (a parallel read's correlation ids) are merged by the stable sort (0.5 against 14 ms);
    the sorted values are the same whichever sort makes them."""
    if values.ndim == 1 and len(values) and values.dtype.kind in "iu":
        top = int(values.max())
        if int(values.min()) >= 0 and top < _MARKED_RANGE * len(values):
            seen = np.zeros(top + 1, dtype=bool)
            seen[values] = True
            return np.flatnonzero(seen).astype(values.dtype)
    descents = np.count_nonzero(values[1:] < values[:-1]) if values.ndim == 1 else len(values)
    ordered = np.sort(values, kind="stable" if descents * _FEW_DESCENTS < len(values) else None)
    firsts: np.ndarray = ordered[first_of_runs(ordered)]
    return firsts


def joined(parts: list[np.ndarray], dtype: np.dtype | type) -> np.ndarray:
    """The parts as one array of ``dtype``, the list emptied, each part freed once copied
    (when the caller holds no other reference): not all held beside the result."""
    out: np.ndarray = np.empty(sum(len(p) for p in parts), dtype=dtype)
    at = 0
    parts.reverse()
    while parts:
        part = parts.pop()
        out[at : at + len(part)] = part
        at += len(part)
    return out
