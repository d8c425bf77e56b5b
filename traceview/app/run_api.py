"""traceview as a library over a run (one trace per rank: a directory, a glob or a list of
files): what ``traceview ranks`` and the other commands over a run answer, through the same
engines (``jobs``, ``engine="dask"``) and the same per-rank cache entries.

Every rank is summarised once per kernel selection and kept: ``ranks()``, ``steps()`` and
``gaps()`` share one pass over the files; ``kernels(...)`` with other options makes another.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from traceview.app.api import _at_least, _with_forms, checked, read_options
from traceview.choices import KernelGroupBy, KernelSort
from traceview.errors import UsageError
from traceview.options import ReadOptions, RunOptions

if TYPE_CHECKING:
    from traceview.analyses.kernels import KernelOptions
    from traceview.analyses.runs.gaps import GapRollup
    from traceview.analyses.runs.kernels import RollupReport
    from traceview.analyses.runs.ranks import RanksReport
    from traceview.analyses.runs.snapshot import RunSnapshot
    from traceview.analyses.runs.steps import StepRollup
    from traceview.app.engines.worker import RunResult

# The run options a Run takes as keywords (per_rank is an analysis' own keyword).
RUN_KEYWORDS = tuple(f.name for f in fields(RunOptions) if f.name != "per_rank")


class Run:
    """The rank files of a run, summarised on demand. Keywords: the read options of
    ``traceview.open`` and the CLI's run options ``glob``, ``rank_regex``, ``jobs``,
    ``engine``, ``scheduler``, ``scheduler_file``."""

    @checked
    def __init__(self, inputs: Sequence[str | Path], **options: Any) -> None:
        from traceview.app.runs import check_options, run_inputs

        self.inputs = tuple(Path(p) for p in inputs)
        read_names = [f.name for f in fields(ReadOptions) if f.name != "quiet"]
        unknown = sorted(set(options) - set(read_names) - set(RUN_KEYWORDS))
        if unknown:
            known = ", ".join([*read_names, *RUN_KEYWORDS])
            raise UsageError(f"traceview.open: unknown option {unknown[0]!r} ({known})")
        if not self.inputs:
            raise UsageError("traceview.open: an empty list of rank files")
        run = {k: v for k, v in options.items() if k in RUN_KEYWORDS}
        if run.get("scheduler_file") is not None:
            run["scheduler_file"] = Path(run["scheduler_file"])
        self.run_options = RunOptions(**run)
        self.read_options = read_options({k: v for k, v in options.items() if k in read_names})
        check_options(self.run_options)
        self.files = run_inputs(self.inputs, self.run_options)  # the files, found now
        self._results: dict[tuple[KernelOptions, bool], RunResult] = {}

    def _gather(self, kernels: KernelOptions | None = None, per_rank: bool = False) -> RunResult:
        """Every rank's summary and the roll-up, once per kernel selection (and per-rank
        tables or not)."""
        from traceview.analyses.kernels import KernelOptions
        from traceview.app.reading import wait_for_cache_writes
        from traceview.app.runs import gather

        key = (kernels or KernelOptions(), per_rank)
        if key not in self._results:
            run = replace(self.run_options, per_rank=per_rank)
            try:
                self._results[key] = gather(
                    self.inputs, run, self.read_options, key[0], report=per_rank
                )
            finally:
                wait_for_cache_writes()
        return self._results[key]

    def ranks(self) -> RanksReport:
        """``traceview ranks``."""
        from traceview.analyses.runs.ranks import ranks_report
        from traceview.render.runs import ranks as render

        result = self._gather()
        report = ranks_report(result.summaries, result.rollup, result.waits)
        return _with_forms(report, render.document)

    @checked
    def kernels(
        self,
        sort: KernelSort | str = KernelSort.DURATION_PERCENTAGE,
        top: int = 10,
        group_by: KernelGroupBy | str = KernelGroupBy.NAME,
        pstep: str | None = None,
        include: str = "kernel",
        name: str | None = None,
        per_rank: bool = False,
    ) -> RollupReport:
        """``traceview kernels`` over the run: the roll-up (and each rank's with per_rank)."""
        from traceview.analyses.kernels import KernelOptions
        from traceview.analyses.kernels import check_options as check_kernels
        from traceview.analyses.runs.kernels import check_options, rollup_report
        from traceview.parsing import parse_steps
        from traceview.render.runs import kernels as render

        kinds = tuple(k.strip() for k in include.split(",") if k.strip())
        options = KernelOptions(
            sort=cast(KernelSort, sort),  # checked below, as for the CLI
            top=top,
            group_by=cast(KernelGroupBy, group_by),
            include=kinds if "kernel" in kinds else ("kernel", *kinds),
            name_regex=name,
            steps=tuple(parse_steps(pstep)) if pstep else (),
        )
        check_kernels(options)
        check_options(options)
        result = self._gather(options, per_rank)
        report = rollup_report(result.summaries, result.rollup, options)
        return _with_forms(report, lambda r: render.document(r, False))

    @checked
    def steps(self, top: int = 100, per_rank: bool = False) -> StepRollup:
        """``traceview steps`` over the run: per step its spread over the ranks."""
        from traceview.analyses.runs.steps import step_rollup
        from traceview.render.runs import steps as render

        top = _at_least("--top", top)
        result = self._gather(per_rank=per_rank)
        report = step_rollup(result.summaries, result.rollup)
        return _with_forms(report, lambda r: render.document(r, top))

    def gaps(self) -> GapRollup:
        """``traceview gaps`` over the run: device gaps per rank and over the run."""
        from traceview.analyses.runs.gaps import gap_rollup
        from traceview.render.runs import gaps as render

        result = self._gather()
        return _with_forms(gap_rollup(result.summaries, result.rollup), render.document)

    def snapshot(self) -> RunSnapshot:
        """``traceview snapshot`` of the run (the baseline of ``traceview diff``)."""
        from traceview.analyses.kernels import KernelOptions
        from traceview.app.reading import wait_for_cache_writes
        from traceview.app.runs import run_snapshot

        try:
            return run_snapshot(self.inputs, self.run_options, self.read_options, KernelOptions())
        finally:
            wait_for_cache_writes()
