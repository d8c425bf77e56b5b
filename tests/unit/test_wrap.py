"""Names and report lines on a narrow terminal: a name in at most two lines, broken where it
parts and shortened in the middle when longer; report lines with a hanging indent."""

from __future__ import annotations

import io
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from traceview.render.escape import print_line
from traceview.render.tables import Table, to_rich
from traceview.render.wrap import ELLIPSIS, fit_name, hanging, width_of, wrap

CUTLASS = "cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_tn_align1>"
ELEMENTWISE = (
    "at::native::vectorized_elementwise_kernel<…, AUnaryFunctor<float, float, float, "
    "MulFunctor<float>>, …>"
)
NAME_CHARS = st.text(st.sampled_from("abcXYZ_:<>(), 0189…漢"), max_size=160)


def test_a_name_that_fits_stays_whole() -> None:
    assert fit_name("aten::mm", 20) == ["aten::mm"]


def test_a_name_breaks_where_it_parts_never_inside_a_word() -> None:
    """``aten::_cudnn_attention_backwar``/``d`` at 120 columns was the complaint."""
    assert fit_name("aten::_cudnn_attention_backward", 30) == [
        "aten::_cudnn_attention_",
        "backward",
    ]
    assert fit_name(CUTLASS, 56) == [
        "cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_",
        "bf16_128x128_tn_align1>",
    ]


def test_a_long_name_keeps_its_start_and_end_with_an_ellipsis_between() -> None:
    assert fit_name(CUTLASS, 24) == ["cutlass::…s1688gemm_", "bf16_128x128_tn_align1>"]
    assert fit_name(ELEMENTWISE, 42) == [
        "at::native::…AUnaryFunctor<float, float,",
        "float, MulFunctor<float>>, …>",
    ]
    # the example: the template's head and its distinguishing end
    assert fit_name(CUTLASS, 41, max_lines=1) == ["cutlass::Kernel2<…bf16_128x128_tn_align1>"]


@given(NAME_CHARS, st.integers(2, 90))  # a wide character takes 2
def test_any_name_fits_its_lines_and_width(name: str, width: int) -> None:
    lines = fit_name(name, width)
    assert 1 <= len(lines) <= 2
    assert all(width_of(line) <= width for line in lines)
    if width_of(name) <= width:
        assert lines == [name]
    wrapped = wrap(name, width)
    if len(wrapped) <= 2:
        assert lines == wrapped  # only wrapped: nothing lost
    else:
        assert ELLIPSIS in "".join(lines)


@given(NAME_CHARS, st.integers(2, 90))  # a wide character takes 2
def test_wrap_loses_nothing_but_line_end_spaces(text: str, width: int) -> None:
    lines = wrap(text, width)
    assert all(width_of(line) <= width for line in lines)
    assert "".join(lines).replace(" ", "") == text.replace(" ", "")


def test_a_number_keeps_its_unit() -> None:
    assert wrap("host wait 111.3 µs of 14.0 ms here", 26, prose=True) == [
        "host wait 111.3 µs of",
        "14.0 ms here",
    ]


def test_a_report_line_hangs_under_its_value() -> None:
    line = "warning  619 GPU activities have no matching launch event (--pstep uses their own start"
    assert hanging(line, 60) == [
        "warning  619 GPU activities have no matching launch event",
        "         (--pstep uses their own start",
    ]
    try_line = hanging("         try: a continuation " + "word " * 20, 60)
    assert try_line[1].startswith(" " * 14 + "word")  # under the text after ``try:``
    listed = hanging("#1 at ts 1727000001633913.000 µs: thread 2841/2841: " + "op " * 20, 50)
    assert listed[1].startswith("   ") and listed[1][3] != " "  # under the text after ``#1``
    assert hanging("no key here, " + "word " * 20, 30)[1].startswith("word")


def test_a_terminal_line_hangs_and_a_piped_one_does_not() -> None:
    line = "device   0: window 641.0 ms = compute 468.1 ms (73.02%) + idle 171.9 ms (26.82%)"
    terminal = Console(file=io.StringIO(), width=50, color_system=None)
    print_line(terminal, line)
    lines = terminal.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert len(lines) == 2 and lines[1].startswith(" " * 9 + "(73.02%)")
    log = Console(file=io.StringIO(), width=50, color_system=None, soft_wrap=True)
    print_line(log, line)
    assert log.file.getvalue() == line + "\n"  # type: ignore[attr-defined]


@pytest.mark.parametrize("width", [80, 120])
def test_no_name_takes_more_than_two_lines_in_a_table(width: int) -> None:
    names = [CUTLASS, ELEMENTWISE, "x" * 300, "aten::mm"]
    rows = [(str(i), "1,234", "12.34 ms", "5.6 µs", name) for i, name in enumerate(names, 1)]
    table = Table(("#", "Count", "Total", "P99", "Kernel"), (True, True, True, True, False), rows)
    console = Console(file=io.StringIO(), width=width, color_system=None)
    to_rich(table, console, drop_order=["P99"])
    out = console.file.getvalue()  # type: ignore[attr-defined]
    body = [line for line in out.splitlines()[3:] if line.strip()]
    starts = [k for k, line in enumerate(body) if re.match(r"\s+\d+\s", line)]
    assert len(starts) == len(names)
    spans = [b - a for a, b in zip(starts, [*starts[1:], len(body)], strict=True)]
    assert all(span <= 2 for span in spans), out
    assert all(len(line) <= width for line in out.splitlines())
