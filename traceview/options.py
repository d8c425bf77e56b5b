"""How a command reads its traces and takes a run of several rank files: frozen objects,
built once per command by the CLI (or by a library caller)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


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

    def side_files(self) -> tuple[Path, ...]:
        """The files these options name besides the traces (an -o never replaces them)."""
        return () if self.scheduler_file is None else (self.scheduler_file,)


class NamesFiles(Protocol):
    """Options that name files besides the traces: a power log, a peaks file."""

    def side_files(self) -> tuple[Path, ...]: ...


def inputs_of(traces: Sequence[Path], *options: NamesFiles | None) -> tuple[Path, ...]:
    """Every input of a command, the traces and the side files its options name: what an
    output file (``-o``) must never be, ``--force`` or not."""
    side = (p for o in options if o is not None for p in o.side_files())
    return (*traces, *side)


__all__ = ["ENGINES", "NamesFiles", "ReadOptions", "RunOptions", "inputs_of"]
