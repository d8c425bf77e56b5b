"""How a command reads its traces: one frozen object, built once per command by the CLI."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ReadOptions:
    """How to read the trace (the flags every reading command shares)."""

    partial: bool = False
    quiet: bool = False
    strict: bool = False
    cache: bool = True
    refresh: bool = False
    cache_dir: Path | None = None
    verify: bool = False
    step_regex: str | None = None  # steps from the CPU ranges whose name matches it


__all__ = ["ReadOptions"]
