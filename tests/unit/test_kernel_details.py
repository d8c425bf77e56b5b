"""A kernels table cut by --top works out std and percentiles only for the rows it shows, from
their rows alone: the figures must equal, to the last bit, those of the same rows in the
whole table (no --top), whatever the sort. A selection (kinds, a name pattern) is worked out
over the whole columns, the rows left out in a group of their own: its figures must equal,
to the last bit, those of a trace holding the selected rows alone."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path
from unittest import mock

import pytest
from conftest import ROOT, load_generator

from traceview.aggregate import moments
from traceview.analyses.kernels import KernelOptions, analyse_kernels, selection
from traceview.app import reading
from traceview.choices import KernelGroupBy, KernelSort
from traceview.columns.model import TraceEvents
from traceview.options import ReadOptions


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, TraceEvents]:
    """The demo, and 60,000 launches under 4,000 names."""
    path = tmp_path_factory.mktemp("details") / "many.json"
    load_generator().write_scale_trace(path, kernels=60_000, names=4000, streams=3)
    read = ReadOptions(quiet=True, cache=False)
    return {
        "demo": reading.read_trace(ROOT / "fixtures" / "demo.json.gz", read),
        "many": reading.read_trace(Path(path), read),
    }


@pytest.mark.parametrize("name", ["demo", "many"])
@pytest.mark.parametrize("sort", list(KernelSort))
def test_top_rows_equal_the_whole_tables_rows(
    traces: dict[str, TraceEvents], name: str, sort: KernelSort
) -> None:
    events = traces[name]
    # batches of 1,000 rows instead of 2^20: a name's rows fall in several
    with mock.patch.object(moments.accumulate, "__defaults__", (1000, None, None)):
        whole = analyse_kernels(events, KernelOptions(sort=sort, top=0)).rows
        for top in (1, 7):
            rows = analyse_kernels(events, KernelOptions(sort=sort, top=top)).rows
            assert rows == whole[:top]


@pytest.mark.parametrize("name", ["demo", "many"])
@pytest.mark.parametrize("group_by", [KernelGroupBy.NAME, KernelGroupBy.SHORT])
@pytest.mark.parametrize("pattern", [None, "[02468],"])
@pytest.mark.parametrize("top", [0, 3])
def test_a_selection_equals_a_trace_of_its_rows_alone(
    traces: dict[str, TraceEvents],
    name: str,
    group_by: KernelGroupBy,
    pattern: str | None,
    top: int,
) -> None:
    events = traces[name]
    options = KernelOptions(top=top, group_by=group_by, name_regex=pattern)
    mask, _ = selection(events, options)
    if mask.all():
        pytest.skip("every row selected (the many-names trace holds kernels alone)")
    assert mask.any()
    gpu = events.gpu
    alone = replace(
        events, gpu=type(gpu)(**{f.name: getattr(gpu, f.name)[mask] for f in fields(gpu)})
    )
    with mock.patch.object(moments.accumulate, "__defaults__", (1000, None, None)):
        rows = analyse_kernels(events, options).rows
        expected = analyse_kernels(alone, replace(options, name_regex=None)).rows
    assert rows == expected
