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
        us_key(f.name): getattr(result, f.name) / 1000
        if f.name.endswith("_ns")
        else getattr(result, f.name)
        for f in fields(result)
        if f.name not in skip
    }


def us_names(result_type: Any) -> list[str]:
    """The keys ``us_fields`` gives for a dataclass type, in order."""
    return [us_key(f.name) for f in fields(result_type)]
