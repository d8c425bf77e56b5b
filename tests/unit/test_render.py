"""Rendering: exact lines where layout matters, narrow terminals, names that attack outputs."""

from __future__ import annotations

import csv
import io
import re

import pytest
from hostile import MARKDOWN, NAMES, RICH_MISREADINGS, SHOWN, unsafe_characters
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from traceview.render.escape import markdown_text, print_line, visible
from traceview.render.tables import Table, fit, to_csv, to_markdown, to_rich, to_text

TABLE = Table(
    ("#", "Kernel", "Count", "Std (µs)", "Total (µs)"),
    (True, False, True, True, True),
    [("1", "at::native::vectorized_elementwise_kernel", "12", "0.500", "1,234.567")],
)


def test_text_is_aligned_exactly() -> None:
    assert to_text(TABLE).splitlines() == [
        "#  Kernel                                     Count  Std (µs)  Total (µs)",
        "-  -----------------------------------------  -----  --------  ----------",
        "1  at::native::vectorized_elementwise_kernel     12     0.500   1,234.567",
    ]


def test_markdown_escapes_pipes() -> None:
    table = Table(("Name", "N"), (False, True), [("a|b", "1")])
    assert to_markdown(table) == "| Name | N |\n|---|---:|\n| a\\|b | 1 |\n"


def test_fit_drops_columns_in_order_until_it_fits() -> None:
    assert fit(TABLE, 200, ["Std (µs)"]) == (TABLE, [])
    narrow, dropped = fit(TABLE, 50, ["Std (µs)", "Count"])  # needs 52 with Count, 44 without
    assert narrow.headers == ("#", "Kernel", "Total (µs)")
    assert narrow.rows == [("1", "at::native::vectorized_elementwise_kernel", "1,234.567")]
    assert dropped == ["Std (µs)", "Count"]


def test_rich_table_keeps_the_name_column_on_a_narrow_terminal() -> None:
    """Statistics give way until the name shows whole in two lines, broken where it parts."""
    out = io.StringIO()
    console = Console(file=out, width=60, color_system=None)
    to_rich(TABLE, console, drop_order=["Std (µs)", "Count"])
    table, footer = out.getvalue().split("hidden at")
    assert "Kernel" in table and "Std" not in table and "Count" in table
    assert "at::native::vectorized_" in table and "elementwise_kernel" in table
    assert footer == " 60 columns: Std (µs); use --wide or -f md\n"  # said under the table
    narrower = Console(file=io.StringIO(), width=50, color_system=None)
    to_rich(TABLE, narrower, drop_order=["Std (µs)", "Count"])
    shown, said = narrower.file.getvalue().split("hidden at")  # type: ignore[attr-defined]
    assert "Count" not in shown and "Count" in said


# Names are data: no markup, no emoji codes, no control characters, no cell breaks.
ROWS = [(str(i), name, f"{-i}.500") for i, name in enumerate(NAMES, 1)]
HOSTILE_TABLE = Table(("#", "Kernel", "Delta (µs)"), (True, False, True), ROWS)
RICH_STYLE = re.compile(r"\x1b\[[01]m")  # the bold and reset codes of our own header style


def terminal() -> Console:
    return Console(file=io.StringIO(), force_terminal=True, color_system="truecolor", width=300)


def test_rich_table_shows_every_name_verbatim_on_a_terminal() -> None:
    console = terminal()
    to_rich(HOSTILE_TABLE, console)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    for shown in SHOWN.values():
        assert shown in out
    assert not any(bad in out for bad in RICH_MISREADINGS), out
    assert unsafe_characters(RICH_STYLE.sub("", out)) == set()


def test_lines_print_verbatim_on_a_terminal() -> None:
    console = terminal()
    for name in NAMES:
        print_line(console, f"note     {name}", "bold red")
    out = console.file.getvalue()  # type: ignore[attr-defined]
    lines = re.sub(r"\x1b\[(?:1;31|0)m", "", out).splitlines()
    assert lines == [f"note     {shown}" for shown in SHOWN.values()]


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("esc\x1b[2J", r"esc\x1b[2J"),
        ("bell\x07 nul\x00 del\x7f", r"bell\x07 nul\x00 del\x7f"),
        ("a\nb\rc\td", r"a\nb\rc\td"),
        ("c1 \x85\x9b", r"c1 \x85\x9b"),
        ("rlo\u202e lri\u2066 pdi\u2069", r"rlo\u202e lri\u2066 pdi\u2069"),
        ("lrm\u200e rlm\u200f zwj\u200d bom\ufeff", r"lrm\u200e rlm\u200f zwj\u200d bom\ufeff"),
        ("ls\u2028 ps\u2029 tag\U000e0041", r"ls\u2028 ps\u2029 tag\U000e0041"),
        ("lone \ud800", r"lone \ud800"),
        ("café 漢字 🚀 nbsp\u00a0 µs", "café 漢字 🚀 nbsp\u00a0 µs"),
        (r"a literal \x1b stays", r"a literal \x1b stays"),
    ],
)  # fmt: skip
def test_visible_escapes_control_and_format_characters_only(name: str, shown: str) -> None:
    assert visible(name) == shown


def test_text_table_escapes_names_and_stays_aligned() -> None:
    lines = to_text(HOSTILE_TABLE).splitlines()
    assert len(lines) == len(NAMES) + 2  # a newline in a name does not start a line
    assert len({len(line) for line in lines}) == 1  # right-aligned last column: same length
    for line, shown in zip(lines[2:], SHOWN.values(), strict=True):
        assert f"  {shown}" in line
    assert unsafe_characters("\n".join(lines)) == set()


def unescaped_pipes(line: str) -> int:
    """Cell delimiters as GitHub's table parser counts them (a pipe after \\ is text)."""
    return len(re.findall(r"(?<!\\)\|", line))


def test_markdown_table_keeps_its_cells_and_escapes_names() -> None:
    text = to_markdown(HOSTILE_TABLE)
    lines = text.splitlines()
    assert len(lines) == len(NAMES) + 2
    assert {unescaped_pipes(line) for line in lines} == {4}
    for shown in MARKDOWN.values():
        assert f"| {shown} |" in text
    assert "<" not in text and ">" not in text and unsafe_characters(text) == set()


def test_markdown_keeps_snake_case_readable_but_escapes_emphasis() -> None:
    table = Table(("Kernel",), (False,), [("ampere_sgemm_128x64_tn",), ("__init__ _x_ a*b*c",)])
    assert to_markdown(table).splitlines()[2:] == [
        "| ampere_sgemm_128x64_tn |",
        r"| \_\_init\_\_ \_x\_ a\*b\*c |",
    ]


def test_csv_round_trips_and_neutralises_formulas_in_text_cells_only() -> None:
    rows = [(name, -1.5, -3) for name in NAMES] + [("bare\rcr", 0, 0)]
    text = to_csv(("name", "delta_us", "count"), rows)
    assert "\r" not in text and unsafe_characters(text) == set()
    read = list(csv.reader(io.StringIO(text, newline="")))
    assert read[0] == ["name", "delta_us", "count"]
    assert len(read) == len(rows) + 1 and {len(row) for row in read} == {3}
    formulas = {"=HYPERLINK(1)", "+1+2", "-3", "@SUM(A1)", "\ttab first"}
    for name, row in zip(NAMES, read[1:], strict=False):
        assert row[0] == ("'" if name in formulas else "") + SHOWN[name]
        assert row[1:] == ["-1.5", "-3"]  # numbers are never prefixed
    assert read[-1] == [r"bare\rcr", "0", "0"]


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(blacklist_categories=())))  # every code point, surrogates too
def test_any_name_is_safe_in_every_rendering(name: str) -> None:
    shown = visible(name)
    assert unsafe_characters(shown) == set() and "\n" not in shown
    assert visible(shown) == shown  # escaping twice changes nothing
    cell = markdown_text(name)
    assert unescaped_pipes(cell) == 0 and "<" not in cell and "\n" not in cell
    (_, row) = csv.reader(io.StringIO(to_csv(("name",), [(name,)]), newline=""))
    assert row == [("'" if name.startswith(("=", "+", "-", "@", "\t", "\r")) else "") + shown]


def test_header_durations_below_a_microsecond_in_ns() -> None:
    from traceview.render.units import duration

    assert [duration(v) for v in (0.02, 0.9996, 0, 1, 850, 12_345, 4_560_000)] == [
        "20 ns", "1,000 ns", "0.0 µs", "1.0 µs", "850.0 µs", "12.3 ms", "4.56 s",
    ]  # fmt: skip


@given(st.one_of(st.floats(allow_nan=False), st.floats(0.5, 200), st.floats(-200, -0.5)))
def test_table_times_of_most_kernels_take_the_quick_path_to_the_same_text(value: float) -> None:
    """From 1 to 100 µs a duration is shown without the general unit search (a report of
    10^6 kernels formats 10^7 of them): the same text as that search gives."""
    from traceview.render import units

    assert units.time(value) == units._time(value, abs(value))
