"""Outputs of every row (``kernels -f csv``, ``--top 0``, ``-o``; ``gaps -o``, ``--gap-top 0``)
are written as their rows are made (issue #21): the same text, to the byte, as when every
row is made first, and nothing half-written is left behind when making one fails.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import load_generator
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from traceview.analyses.core import streamed
from traceview.analyses.core.names import display_names, display_names_in_order
from traceview.analyses.core.streamed import Each, Streamed
from traceview.analyses.gaps import GapOptions, analyse_gaps
from traceview.analyses.kernels import KernelOptions, analyse_kernels, sort_key
from traceview.app import reading
from traceview.columns.model import TraceEvents
from traceview.errors import TraceviewError
from traceview.options import ReadOptions
from traceview.render import document as doc_module
from traceview.render import gaps as render_gaps
from traceview.render import kernels as render_kernels
from traceview.render import tables
from traceview.render.document import (
    Document,
    print_rich,
    to_csv_text,
    to_json_text,
    to_md,
    to_plain,
)
from traceview.render.output import write_file
from traceview.render.tables import csv_chunks

gen = load_generator()


@pytest.fixture(scope="module")
def colliding(tmp_path_factory: pytest.TempPathFactory) -> TraceEvents:
    """600 names in groups of 8 that share a short name (told apart by an argument), some
    counts tied, on 4 streams."""
    path = tmp_path_factory.mktemp("streamed") / "t.json"
    gen.write_scale_trace(path, kernels=3000, names=600, streams=4, steps=4)
    return reading.read_trace(path, ReadOptions(quiet=True, cache=False))


@pytest.fixture(autouse=True)
def _small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of a few rows, so that every output crosses many chunk boundaries."""
    monkeypatch.setattr(streamed, "_AT_ONCE", 7)
    monkeypatch.setattr(tables, "_LINES_AT_ONCE", 5)
    monkeypatch.setattr(doc_module, "_ITEMS_AT_ONCE", 3)


def _renderings(doc: Document) -> list[str]:
    terminal = io.StringIO()  # narrow: columns left out, names folded
    print_rich(doc, Console(file=terminal, width=90))
    return [to_plain(doc), to_md(doc), to_json_text(doc), to_csv_text(doc), terminal.getvalue()]


@pytest.mark.parametrize("sort", ["duration-percentage", "count", "name", "max"])
@pytest.mark.parametrize("group_by", ["name", "short"])
def test_streamed_kernel_rows_render_as_listed_ones(
    colliding: TraceEvents, sort: str, group_by: str
) -> None:
    options = KernelOptions(top=0, sort=sort, group_by=group_by)  # type: ignore[arg-type]
    listed = analyse_kernels(colliding, options)
    made = analyse_kernels(colliding, options, streamed=True)
    assert isinstance(made.rows, Streamed) and isinstance(listed.rows, list)
    assert list(made.rows) == listed.rows and len(made.rows) == len(listed.rows) > 50
    assert made.rows[5] == listed.rows[5] and made.rows[3:20] == listed.rows[3:20]
    for verbose in (False, True):
        assert _renderings(render_kernels.document(made, verbose)) == _renderings(
            render_kernels.document(listed, verbose)
        )
    assert "".join(render_kernels.detailed_report(made)) == "".join(
        render_kernels.detailed_report(listed)
    )


@pytest.mark.parametrize("sort", ["duration-percentage", "count", "total", "name"])
def test_every_row_comes_in_the_order_of_the_sort_key(colliding: TraceEvents, sort: str) -> None:
    """--top 0 orders every group by one sort of the values, ties by name: as the rows sort
    by the table's key (count ties hundreds of names here)."""
    rows = analyse_kernels(colliding, KernelOptions(top=0, sort=sort), streamed=True).rows  # type: ignore[arg-type]
    everything = list(rows)
    assert everything == sorted(everything, key=sort_key(sort))
    if sort == "count":
        assert len({r.count for r in everything}) < len(everything) / 10


def test_streamed_transitions_render_as_listed_ones(colliding: TraceEvents) -> None:
    for options in (GapOptions(top=0, stream_top=0), GapOptions(top=0, per_stream=True)):
        listed = analyse_gaps(colliding, options)
        made = analyse_gaps(colliding, options, streamed=True)
        assert isinstance(made.transitions, Streamed)
        assert list(made.transitions) == listed.transitions and len(listed.transitions) > 100
        for verbose in (False, True):
            assert _renderings(render_gaps.document(made, verbose)) == _renderings(
                render_gaps.document(listed, verbose)
            )
        assert "".join(render_gaps.detailed_report(made)) == "".join(
            render_gaps.detailed_report(listed)
        )


_POOL = [
    "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params)",
    "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_256x128_32x3_nt_align4>(Params)",
    "void k<a::X, 1>(int)", "void k<b::X, 2>(int)", "void k<c::X, 2>(int)", "void k<int>(int)",
    "void ns::f<a::X>(int)", "void ns::f<b::X>(int)", "k(double)", "k #1", "k<1>", "x", "",
    "Cijk_Ailk_Bljk_BBS_BH_MT32x32x64_MI16x16x1_SN_1LDSB0_ELFLR0",
    "Cijk_Ailk_Bljk_BBS_BH_MT32x32x64_MI16x16x1_SN_1LDSB0_ELFLR8",
]  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(_POOL), unique=True))
def test_display_names_in_order_are_the_display_names(names: list[str]) -> None:
    shown = display_names(names)
    assert list(display_names_in_order(names)) == [shown[n] for n in names]


def test_display_names_in_order_with_many_groups() -> None:
    """Many groups of colliding short names, in order: the same names as the lazy mapping."""
    names = [f"void ns::k{i // 5}<{i}, float>(int)" for i in range(200)] + _POOL
    shown = display_names(names)
    assert list(display_names_in_order(names)) == [shown[n] for n in names]


def test_arguments_alike_once_brief_do_not_tell_names_apart() -> None:
    """Arguments are made brief only where they differ as written; ``a::X`` and ``b::X``
    are then alike (``X``), and another argument, or ``#k``, tells the names apart."""
    assert display_names(["void k<a::X, 1>(int)", "void k<b::X, 2>(int)"]) == {
        "void k<a::X, 1>(int)": "k<…, 1>",
        "void k<b::X, 2>(int)": "k<…, 2>",
    }
    assert display_names(["void ns::f<a::X>(int)", "void ns::f<b::X>(int)"]) == {
        "void ns::f<a::X>(int)": "ns::f #1",
        "void ns::f<b::X>(int)": "ns::f #2",
    }


def _json_values(max_leaves: int = 12) -> st.SearchStrategy[tuple[Any, Any]]:
    """(a value with ``Each`` lists in it, the same value with plain lists)."""
    leaves = st.one_of(
        st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1),
        st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8),
    ).map(lambda v: (v, v))  # fmt: skip

    def nest(children: st.SearchStrategy[tuple[Any, Any]]) -> st.SearchStrategy[tuple[Any, Any]]:
        items = st.lists(children, max_size=5)
        return st.one_of(
            items.map(lambda xs: ([a for a, _ in xs], [b for _, b in xs])),
            items.map(lambda xs: (Each([a for a, _ in xs], lambda v: v), [b for _, b in xs])),
            st.dictionaries(st.text(max_size=4), children, max_size=4).map(
                lambda d: ({k: a for k, (a, _) in d.items()}, {k: b for k, (_, b) in d.items()})
            ),
        )

    return st.recursive(leaves, nest, max_leaves=max_leaves)


@settings(max_examples=300, deadline=None)
@given(_json_values())
def test_json_written_in_chunks_is_what_orjson_writes(pair: tuple[Any, Any]) -> None:
    value, plain = pair
    doc = Document(head=[], sections=[], data=lambda: value, csv=None)
    assert to_json_text(doc) == orjson.dumps(plain, option=orjson.OPT_INDENT_2).decode() + "\n"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="\nab", max_size=6), max_size=8))
def test_chunks_stripped_of_trailing_newlines_as_the_whole_text(chunks: list[str]) -> None:
    assert "".join(doc_module._rstripped(chunks)) == "".join(chunks).rstrip("\n")


@pytest.mark.parametrize("rows", [0, 1, 5, 6, 23])
def test_csv_in_chunks_is_the_csv_of_every_row(rows: int) -> None:
    data = [(i, f"=name {i}", i / 3) for i in range(rows)]
    text = "".join(csv_chunks(("n", "name", "x"), iter(data)))
    assert list(csv.reader(io.StringIO(text)))[1:] == [
        [str(i), f"'=name {i}", str(i / 3)] for i in range(rows)
    ]
    assert text.startswith("n,name,x\n")


def test_a_file_whose_text_fails_half_way_is_never_written(tmp_path: Path) -> None:
    """The chunks go to a temp file beside the target: an error while they are made leaves
    the target as it was and no temp file behind."""
    target = tmp_path / "report.txt"
    target.write_text("before\n")

    def chunks() -> Iterator[str]:
        yield "first rows\n"
        raise TraceviewError("made up")

    with pytest.raises(TraceviewError):
        write_file(target, chunks(), force=True)
    assert target.read_text() == "before\n" and [p.name for p in tmp_path.iterdir()] == [
        "report.txt"
    ]
    write_file(target, iter(["a\n", "", "é\n"]), force=True)
    assert target.read_text(encoding="utf-8") == "a\né\n"
