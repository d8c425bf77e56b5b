"""``traceview diff --explain -f html -o F``: the waterfall page, checked against the JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_fixtures_generator import gen
from test_report import DEMO, XSS, embedded, without_plotly
from typer.testing import CliRunner

from traceview.cli import app

runner = CliRunner()


@pytest.fixture(scope="module")
def second(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A second run: the generator with another seed (its kernels differ from the demo's)."""
    path = tmp_path_factory.mktemp("diff-page") / "seed2.json"
    gen.write_trace(path, steps=4, seed=2)
    return path


def _page(tmp: Path, base: Path, new: Path, *more: str) -> str:
    out = tmp / "diff.html"
    r = runner.invoke(app, ["diff", str(base), str(new), "--explain", "-f", "html", "-o", str(out),
                            "-q", *more])  # fmt: skip
    assert r.exit_code == 0, r.output
    assert r.stdout == ""
    return out.read_text("utf-8")


def _json(base: Path, new: Path, *more: str) -> dict[str, Any]:
    r = runner.invoke(app, ["diff", str(base), str(new), "--explain", "-f", "json", "-q", *more])
    assert r.exit_code == 0, r.output
    return dict(json.loads(r.stdout))


def _bars(page: str) -> dict[str, Any]:
    (trace,) = embedded(page, "tv-charts")["waterfall"]["data"]
    assert trace["type"] == "waterfall"
    return dict(trace)


def test_the_waterfall_is_the_json_s_parts(tmp_path: Path, second: Path) -> None:
    page = _page(tmp_path, DEMO, second, "--top", "0")
    doc = _json(DEMO, second, "--top", "0")
    explain = doc["explain"]
    assert embedded(page, "tv-data")["diff"] == doc  # the diff's JSON document, inline
    bars = _bars(page)
    parts = explain["parts"]
    assert len(parts) > 3
    assert bars["measure"] == ["absolute"] + ["relative"] * len(parts) + ["total"]
    assert bars["y"][0] == explain["base_step_time_us"]
    assert bars["y"][1:-1] == [p["delta_us"] for p in parts]
    assert bars["y"][-1] == explain["new_step_time_us"]
    # the parts add up to the change (µs from integer ns: exact to rounding of the sum)
    assert sum(bars["y"][1:-1]) == pytest.approx(explain["total_us"], abs=1e-6)
    total_ns = sum(round(p["delta_us"] * 1000) for p in parts)
    assert total_ns == round(explain["total_us"] * 1000)
    assert explain["total_us"] != 0
    # the sentence above names the three largest parts, as the text output does
    lead = [p for p in parts[:3] if p["delta_us"]]
    sentence = page[page.index('<p class="lead">') :].split("</p>", 1)[0]
    assert "largest parts:" in sentence and all(f"({p['kind']})" in sentence for p in lead)
    assert sentence.index("(" + lead[0]["kind"]) < sentence.rindex("(" + lead[-1]["kind"])


def test_past_top_the_rest_is_one_bar(tmp_path: Path, second: Path) -> None:
    bars = _bars(_page(tmp_path, DEMO, second, "--top", "3"))
    parts = _json(DEMO, second)["explain"]["parts"]
    assert len(bars["y"]) == 1 + 3 + 1 + 1
    assert bars["x"][4] == f"{len(parts) - 3} more parts"
    rest_ns = sum(round(p["delta_us"] * 1000) for p in parts[3:])
    assert round(bars["y"][4] * 1000) == rest_ns


def test_a_self_diff_draws_zero_parts(tmp_path: Path) -> None:
    bars = _bars(_page(tmp_path, DEMO, DEMO, "--top", "0"))
    assert bars["y"][0] == bars["y"][-1] and not any(bars["y"][1:-1])


def hostile_copy(tmp: Path) -> Path:
    """The generated second run (seed 2), its first kernel names (sorted) renamed to XSS's."""
    source = tmp / "seed2.json"
    gen.write_trace(source, steps=4, seed=2)
    doc = json.loads(source.read_text())
    names = sorted({e["name"] for e in doc["traceEvents"] if e.get("cat") == "kernel"})
    hostile = dict(zip(names, XSS, strict=False))
    for event in doc["traceEvents"]:
        if event.get("cat") == "kernel" and event["name"] in hostile:
            event["name"] = hostile[event["name"]]
    new = tmp / "<b>new&.json"
    new.write_text(json.dumps(doc))
    return new


def waterfall_page(tmp: Path, base: Path, new: Path) -> tuple[Path, dict[str, Any]]:
    """The page of ``diff BASE NEW --explain --top 0``, and its waterfall trace."""
    page = _page(tmp, base, new, "--top", "0")
    return tmp / "diff.html", _bars(page)


def test_offline_and_every_name_escaped(tmp_path: Path, second: Path) -> None:
    new = hostile_copy(tmp_path)
    page = _page(tmp_path, second, new, "--top", "0")
    ours = without_plotly(page)
    assert "http://" not in ours and "https://" not in ours
    assert "default-src 'none'" in ours
    for name in XSS:
        assert name not in ours
    assert "<b>new&" not in ours and "&lt;b&gt;new&amp;.json" in ours
    assert "\u2028" not in ours and "<!--" not in ours
    assert ours.count("<script") == 3  # charts, data, report.js: nothing from the trace
    groups = {p["group"] for p in embedded(page, "tv-data")["diff"]["explain"]["parts"]}
    assert set(XSS) <= groups  # the real names, intact, in the JSON document


@pytest.mark.parametrize(
    ("more", "message"),
    [
        (["-o", "x.html"], "add --explain"),
        (["--explain"], "-o FILE"),
    ],
)
def test_usage_errors_are_one_line(tmp_path: Path, more: list[str], message: str) -> None:
    args = ["diff", str(DEMO), str(DEMO), "-f", "html", "-q"]
    r = runner.invoke(app, [*args, *[str(tmp_path / m) if m == "x.html" else m for m in more]])
    assert r.exit_code == 2 and message in r.output
    assert not (tmp_path / "x.html").exists()


def test_without_plotly_the_report_s_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from traceview.render.html import page

    def absent(name: str) -> None:
        return None

    monkeypatch.setattr(page, "find_spec", absent)
    out = tmp_path / "d.html"
    args = ["diff", str(DEMO), str(DEMO), "--explain", "-f", "html", "-o", str(out), "-q"]
    r = runner.invoke(app, args)
    assert r.exit_code == 1
    assert r.output.strip().splitlines() == [f"traceview: error: {page.MISSING_PLOTLY}"]
    assert not out.exists()
