"""Strings plotly draws (ticks, legends, hover labels) are escaped once, its way (issue #34):
plotly reads ``&lt; &gt; &amp;`` but shows ``&quot;`` and ``&#39;`` as written."""

from __future__ import annotations

from traceview.render.escape import plotly_text
from traceview.render.html.charts import device_label, label


def test_quotes_are_left_as_they_are() -> None:
    name = 'at::native::copy_<"fp16">(it\'s) <b>&'
    assert label(name) == 'at::native::copy_<"fp16">(it\'s) <b>&'.replace("&", "&amp;").replace(
        "<", "&lt;"
    ).replace(">", "&gt;")
    assert "&quot;" not in label(name) and "&#39;" not in label(name)
    assert device_label('"0"', "it's") == 'GPU "0" · stream it\'s'


def test_tags_and_control_characters_are_shown_as_written() -> None:
    assert plotly_text("<br>x\x1b[2J") == "&lt;br&gt;x\\x1b[2J"
