"""The library API (traceview.open) against the CLI: the same defaults, the same results
(its JSON equals ``-f json``, its Arrow and pandas forms equal ``-f csv``) and the same
errors, on the demo trace and real traces."""

from __future__ import annotations

import inspect
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.csv
import pytest
import typer
from conftest import ROOT, SHARED_TRACES

import traceview
from traceview.cli import app

TRACES = [
    ROOT / "fixtures" / "demo.json.gz",
    SHARED_TRACES / "h200" / "train.json.gz",
    SHARED_TRACES / "kineto__resnet50_profiler_api_nw0.json.gz",
    SHARED_TRACES / "hta__ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.json.gz",
]
# method: (CLI arguments, API keyword arguments), each the same request
CASES: dict[str, tuple[list[str], dict[str, Any]]] = {
    "kernels": (["kernels", "--top", "5", "--sort", "total"], {"top": 5, "sort": "total"}),
    "kernels-short": (["kernels", "--group-by", "short"], {"group_by": "short"}),
    "gaps": (["gaps", "--gap-top", "4", "--min-gap", "2us"], {"gap_top": 4, "min_gap": "2us"}),
    "steps": (["steps"], {}),
    "summary": (["summary"], {}),
    "ops": (["ops", "--level", "top"], {"level": "top"}),
    "unique": (["unique"], {}),
    "audit": (["audit"], {}),  # exit 0: none of TRACES has an untrusted figure
}
TABLES = {"kernels", "kernels-short", "gaps", "steps", "ops", "unique", "audit"}  # -f csv


def _cli(args: list[str]) -> str:
    r = subprocess.run(
        [sys.executable, "-m", "traceview", *args, "-q"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.fixture(scope="module", params=TRACES, ids=lambda p: p.name.split(".")[0][:40])
def trace(request: pytest.FixtureRequest) -> traceview.Trace:
    path: Path = request.param
    if not path.exists():
        pytest.skip("../shared/traces is absent")
    return traceview.open(path, cache=False)


@pytest.mark.parametrize("case", list(CASES))
def test_json_equals_the_cli(trace: traceview.Trace, case: str) -> None:
    args, kwargs = CASES[case]
    result = getattr(trace, case.split("-")[0])(**kwargs)
    cli = json.loads(_cli([*args, str(trace.path), "-f", "json"]))
    assert json.loads(json.dumps(result.to_json())) == cli


@pytest.mark.parametrize("case", sorted(TABLES))
def test_arrow_and_pandas_equal_the_cli_csv(trace: traceview.Trace, case: str) -> None:
    args, kwargs = CASES[case]
    result = getattr(trace, case.split("-")[0])(**kwargs)
    csv_text = _cli([*args, str(trace.path), "-f", "csv"])
    want = pyarrow.csv.read_csv(io.BytesIO(csv_text.encode()))
    got = result.to_arrow()
    assert got.equals(want)
    pandas = pytest.importorskip("pandas")
    pandas.testing.assert_frame_equal(result.to_pandas(), want.to_pandas())


def test_results_are_the_analyses_dataclasses() -> None:
    from traceview.analyses.gaps import GapReport
    from traceview.analyses.kernels import KernelReport

    t = traceview.open(ROOT / "fixtures" / "demo.json.gz", cache=False)
    kernels, gaps = t.kernels(), t.gaps()
    assert isinstance(kernels, KernelReport) and isinstance(gaps, GapReport)
    with pytest.raises(AttributeError):  # frozen, as the CLI's
        kernels.count = 0  # type: ignore[misc]


def test_events_are_the_export_tables() -> None:
    t = traceview.open(ROOT / "fixtures" / "demo.json.gz", cache=False)
    gpu = t.events("gpu")
    assert gpu.column_names[:5] == ["kind", "name", "stream", "ts", "dur"]
    assert gpu.num_rows == sum(
        r.count for r in t.kernels(top=0, include="kernel,memcpy,memset").rows
    )
    with pytest.raises(traceview.TraceviewError, match="expected one of gpu"):
        t.events("nope")


def test_events_with_names_need_no_join() -> None:
    """``events("gpu", names=True)``: the names, devices, streams and kinds the ids stand
    for, row for row as the join of the export tables gives them."""
    t = traceview.open(ROOT / "fixtures" / "demo.json.gz", cache=False)
    ids, named = t.events("gpu"), t.events("gpu", names=True)
    assert named.column_names == [
        "kind", "name", "device", "stream", "ts", "dur", "correlation", "launch"
    ]  # fmt: skip
    names = dict(zip(*t.events("names").to_pydict().values(), strict=True))
    streams = {r["id"]: (json.loads(r["device"]), json.loads(r["stream"]))
               for r in t.events("streams").to_pylist()}  # fmt: skip
    joined = [
        (("kernel", "memcpy", "memset")[r["kind"]], names[r["name"]], *streams[r["stream"]])
        for r in ids.select(["kind", "name", "stream"]).to_pylist()
    ]
    got = named.select(["kind", "name", "device", "stream"]).to_pylist()
    assert [tuple(r.values()) for r in got] == joined
    assert named["ts"] == ids["ts"] and named["dur"] == ids["dur"]
    assert t.events("runtime", names=True) == t.events("runtime")  # no ids to look up


def test_the_gap_list_is_a_table() -> None:
    """``gaps(...).gaps_table()``: the listed gaps (every one with ``largest=0``), as the JSON's
    ``largest`` records, longest first; their lengths add up to the device gap total."""
    t = traceview.open(ROOT / "fixtures" / "demo.json.gz", cache=False)
    top = t.gaps().gaps_table()
    assert top.num_rows == 10
    assert top.to_pylist() == t.gaps().to_json()["largest"]
    every = t.gaps(largest=0, no_context=True)
    table = every.gaps_table()
    assert table.num_rows == every.totals.gaps
    lengths = table["gap_us"].to_pylist()
    assert lengths == sorted(lengths, reverse=True)
    assert sum(lengths) == pytest.approx(every.totals.gap_total_ns / 1000)
    assert set(table["cause"].to_pylist()) <= {"cpu", "gpu", "launch latency", "gpu wait"}


def _cli_defaults(command: str) -> dict[str, Any]:
    """The CLI command's options by parameter name, with their defaults."""
    group = typer.main.get_command(app)
    cmd = group.commands[command]  # type: ignore[attr-defined]
    return {p.name: p.default for p in cmd.params if p.param_type_name == "option"}


@pytest.mark.parametrize(
    "method", ["kernels", "gaps", "steps", "ops", "energy", "unique", "trim", "source"]
)
def test_keywords_are_the_cli_options_with_their_defaults(method: str) -> None:
    cli = _cli_defaults(method)
    for name, p in inspect.signature(getattr(traceview.Trace, method)).parameters.items():
        if name == "self" or p.default is inspect.Parameter.empty:
            continue
        assert name in cli, f"{method}({name}=...) is no option of traceview {method}"
        want = cli[name]
        want = None if want in ((), []) else want
        assert p.default == want, (method, name)


@pytest.mark.parametrize(
    ("call", "cli"),
    [
        (lambda t: t.kernels(sort="bogus"), ["kernels", "--sort", "bogus"]),
        (lambda t: t.gaps(min_gap="-3us"), ["gaps", "--min-gap", "-3us"]),
        (lambda t: t.kernels(pstep="5-3"), ["kernels", "--pstep", "5-3"]),
        (lambda t: t.gaps(gap_sort="nope"), ["gaps", "--gap-sort", "nope"]),
    ],
)
def test_errors_are_the_cli_errors(call: Any, cli: list[str]) -> None:
    demo = ROOT / "fixtures" / "demo.json.gz"
    t = traceview.open(demo, cache=False)
    with pytest.raises(traceview.TraceviewError) as raised:
        call(t)
    r = subprocess.run(
        [sys.executable, "-m", "traceview", *cli, str(demo), "-q"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 2
    words = str(raised.value).split("'")[1]  # the value quoted, as both say it
    assert words in r.stderr, (str(raised.value), r.stderr)


def test_open_errors_are_one_line() -> None:
    with pytest.raises(traceview.TraceviewError, match="no such file"):
        traceview.open("no/such/trace.json")
    with pytest.raises(traceview.TraceviewError, match="unknown option 'bogus'"):
        traceview.open(ROOT / "fixtures" / "demo.json.gz", bogus=1)


RUN = str(SHARED_TRACES / "param__dlrm_8rank_worker*.json.gz")


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda t: t.kernels(top="5"), "kernels: top='5': takes an integer"),
        (lambda t: t.kernels(top=2.5), "kernels: top=2.5: takes an integer"),
        (lambda t: t.kernels(top=True), "kernels: top=True: takes an integer"),
        (lambda t: t.steps(top="3"), "steps: top='3': takes an integer"),
        (lambda t: t.kernels(pstep=2.5), "kernels: pstep=2.5: takes a step number"),
        (lambda t: t.gaps(min_gap=None), "gaps: min_gap=None: takes a duration"),
        (lambda t: t.gaps(stream=5), "gaps: stream=5: takes a list of strings"),
        (lambda t: t.gaps(linear="yes"), "gaps: linear='yes': takes True or False"),
        (lambda t: t.energy(None), "energy: power=None: takes a path"),
        (lambda t: t.events(5), "events: table=5: takes a string"),
        (lambda t: t.kernels(bogus=1), "kernels: got an unexpected keyword argument 'bogus'"),
        (lambda t: t.audit(5), "audit: too many positional arguments"),
        (lambda t: traceview.open(None), "traceview.open: path=None: takes a path"),
        (lambda t: traceview.open(5), "traceview.open: path=5: takes a path"),
        (lambda t: traceview.open(b"path"), "traceview.open: path=b'path': takes a path"),
        (lambda t: traceview.open([b"a"]), "traceview.open: path=[b'a']: takes a path"),
        (lambda t: traceview.open(t.path, cache_dir=5), "traceview.open: cache_dir=5: takes"),
        (lambda t: traceview.open(t.path, partial=1), "traceview.open: partial=1: takes True or"),
        (lambda t: traceview.open(RUN, jobs="2"), "traceview.open: jobs='2': takes an integer"),
    ],
)  # fmt: skip
def test_api_misuse_is_one_error_naming_the_argument(call: Any, words: str) -> None:
    """Not a TypeError or AttributeError from the inside (issue 49): a TraceviewError that
    names the argument and what it takes, checked before anything is read."""
    t = traceview.open(ROOT / "fixtures" / "demo.json.gz", cache=False)
    with pytest.raises(traceview.TraceviewError) as raised:
        call(t)
    assert str(raised.value).startswith(words), str(raised.value)
    assert t._events is None  # refused before the trace was read


def test_natural_forms_are_the_cli_words() -> None:
    """``pstep=5`` is ``"5"``; ``min_gap=5`` is 5 µs, as a bare number on the CLI."""
    t = traceview.open(ROOT / "fixtures" / "demo.json.gz", cache=False)
    assert t.kernels(pstep=6).to_json() == t.kernels(pstep="6").to_json()
    assert t.gaps(min_gap=5).to_json() == t.gaps(min_gap="5us").to_json()
    assert t.gaps(min_gap=0.5).to_json() == t.gaps(min_gap="500ns").to_json()
    assert t.gaps(stream="7").to_json() == t.gaps(stream=["7"]).to_json()
    assert len(t.steps(top=1).to_json()["steps"]) == len(t.steps().to_json()["steps"])


def test_audit_of_a_cut_file_is_untrusted_as_the_cli_exits_1(tmp_path: Path) -> None:
    """A file cut short is a finding, not an error, for audit() as for ``traceview audit``."""
    import gzip

    demo = (ROOT / "fixtures" / "demo.json.gz").read_bytes()
    raw = gzip.decompress(demo)
    cut = tmp_path / "cut.json"
    cut.write_bytes(raw[: len(raw) * 2 // 3])
    result = traceview.open(cut, cache=False).audit()
    assert result.untrusted
    r = subprocess.run(
        [sys.executable, "-m", "traceview", "audit", str(cut), "-f", "json", "-q", "--no-cache"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert r.returncode == 1, r.stderr
    assert json.loads(json.dumps(result.to_json())) == json.loads(r.stdout)


def test_summary_has_no_table_form() -> None:
    t = traceview.open(ROOT / "fixtures" / "demo.json.gz", cache=False)
    with pytest.raises(traceview.TraceviewError, match="no table form"):
        t.summary().to_arrow()


def test_import_is_light_and_names_are_listed() -> None:
    code = "import sys, traceview; print('numpy' in sys.modules, sorted(traceview.__all__))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded, names = out.stdout.split(" ", 1)
    assert loaded == "False"  # the CLI's start-up imports no analysis
    for name in ("open", "Trace", "TraceviewError"):
        assert name in names and hasattr(traceview, name)


def test_the_stub_lists_the_public_names() -> None:
    import ast

    stub = ast.parse((ROOT / "traceview" / "__init__.pyi").read_text())
    (listed,) = [
        node.value for node in stub.body
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "__all__"
    ]  # fmt: skip
    assert ast.literal_eval(listed) == traceview.__all__


def test_the_documented_example_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pandas")
    import re

    text = (ROOT / "docs" / "python.md").read_text()
    code = re.findall(r"```python\n(.*?)```", text, re.S)[0]
    monkeypatch.chdir(ROOT)
    exec(compile(code, "docs/python.md", "exec"), {})


def test_trim_writes_the_steps_kernels(tmp_path: Path) -> None:
    demo = ROOT / "fixtures" / "demo.json.gz"
    t = traceview.open(demo)
    out = t.trim(tmp_path / "step6.json.gz", pstep="6")
    assert out == tmp_path / "step6.json.gz"
    assert traceview.open(out).kernels(top=0).rows == t.kernels(top=0, pstep="6").rows
    with pytest.raises(traceview.TraceviewError, match="is the input trace"):
        t.trim(demo, pstep="6", force=True)
    with pytest.raises(traceview.TraceviewError, match="already exists"):
        t.trim(out, window="1ms:2ms")
    with pytest.raises(traceview.TraceviewError, match="give one of"):
        t.trim(tmp_path / "x.json", pstep="6", around_gap=1)
