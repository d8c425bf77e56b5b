"""How a command reads its traces and takes a run of several rank files: frozen objects,
built once per command by the CLI (or by a library caller)."""

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


ENGINES = ("local", "dask")


@dataclass(frozen=True)
class RunOptions:
    """Which files make the run, how ranks are told, and where they are read."""

    glob: str | None = None
    rank_regex: str | None = None
    jobs: int | None = None  # local engine: processes (None: all cores)
    engine: str = "local"
    scheduler: str | None = None  # dask: the scheduler's address
    scheduler_file: Path | None = None  # dask: its scheduler file
    per_rank: bool = False


__all__ = ["ENGINES", "ReadOptions", "RunOptions"]
