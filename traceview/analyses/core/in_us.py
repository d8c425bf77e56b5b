"""Results hold integer nanoseconds; their JSON and CSV give microseconds. This is the one
conversion, for a result dataclass whose ``*_ns`` fields are serialised as ``*_us`` (ns / 1000,
one correctly rounded division)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any


def us_key(name: str) -> str:
    """``total_ns`` → ``total_us``; other names unchanged."""
    return name.removesuffix("_ns") + "_us" if name.endswith("_ns") else name


def us_fields(result: Any, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The dataclass ``result`` as a dict in field order, ``*_ns`` fields in µs; ``skip``: the
    fields left out."""
    return {
        key: getattr(result, name) / 1000 if in_ns else getattr(result, name)
        for name, key, in_ns in _KEYS.get(type(result)) or _keys(type(result))
        if name not in skip
    }


_KEYS: dict[type, tuple[tuple[str, str, bool], ...]] = {}


def _keys(result_type: type) -> tuple[tuple[str, str, bool], ...]:
    """Each field's name, its key, and whether it is in ns, kept by type (``fields`` takes
    ~1 µs a call: seconds for every row of 10^6)."""
    keys = tuple((f.name, us_key(f.name), f.name.endswith("_ns")) for f in fields(result_type))
    _KEYS[result_type] = keys
    return keys


def us_names(result_type: Any) -> list[str]:
    """The keys ``us_fields`` gives for a dataclass type, in order."""
    return [us_key(f.name) for f in fields(result_type)]
