"""Rendering: exact lines where layout matters, and narrow terminals."""

from __future__ import annotations

import io

from rich.console import Console

from traceview.render.tables import Table, fit, to_markdown, to_rich, to_text

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
    assert fit(TABLE, 200, ["Std (µs)"]) == TABLE
    narrow = fit(TABLE, 50, ["Std (µs)", "Count"])  # needs 52 with Count, 44 without
    assert narrow.headers == ("#", "Kernel", "Total (µs)")
    assert narrow.rows == [("1", "at::native::vectorized_elementwise_kernel", "1,234.567")]


def test_rich_table_keeps_the_name_column_on_a_narrow_terminal() -> None:
    out = io.StringIO()
    console = Console(file=out, width=60, color_system=None)
    to_rich(TABLE, console, drop_order=["Std (µs)", "Count"])
    text = out.getvalue()
    assert "Kernel" in text and "at::native::" in text and "Std" not in text
