"""How a command takes a run of several rank files: one frozen object, built by the CLI."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

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


__all__ = ["ENGINES", "RunOptions"]
