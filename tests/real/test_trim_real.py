"""``traceview trim --pstep N`` on every real trace with steps, for every step: the trimmed
file's kernels are the original's ``kernels --pstep N`` (and the reference's count and time
of the step), its events are the original's byte for byte, its header and trailer too."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest
import reference as ref
from conftest import SHARED_TRACES, real_traces

from traceview.analyses.kernels import KernelOptions, analyse_kernels
from traceview.app import commands
from traceview.app.trim import TrimOptions
from traceview.columns.parallel import collect_events
from traceview.columns.schema import GPU_KINDS
from traceview.options import ReadOptions
from traceview.read.reader import TraceReader
from traceview.render.kernels import as_json

H200 = ("train", "decode", "graphs", "eager", "compiled2")  # big.json.gz: the RSS measurement


def _traces() -> list[object]:
    paths = [*real_traces(), *(SHARED_TRACES / "h200" / f"{n}.json.gz" for n in H200)]
    paths = [p for p in paths if p.exists()]
    if not paths:
        return [pytest.param(None, marks=pytest.mark.skip(reason="../shared/traces is absent"))]
    return [pytest.param(p, id=p.name.removesuffix(".json.gz")) for p in paths]


def _text(path: Path) -> str:
    data = path.read_bytes()
    return (gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data).decode("utf-8")


def _split(text: str) -> tuple[str, Counter[str], str]:
    """(text before the event array's first event, each event's exact text, text after
    the array's ``]``), by the stdlib's raw_decode: independent of traceview's reader."""
    decoder = json.JSONDecoder()
    at = text.find('"traceEvents"')
    pos = text.index("[", at if at >= 0 else 0) + 1
    head, events = text[:pos], Counter[str]()
    while True:
        while text[pos] in " \t\r\n,":
            pos += 1
        if text[pos] == "]":
            return head, events, text[pos + 1 :]
        _, end = decoder.raw_decode(text, pos)
        events[text[pos:end]] += 1
        pos = end


def _kernels(path: Path, steps: tuple[int, ...] = ()) -> dict[str, object]:
    """What ``kernels`` says, but the trace's own facts: every row (exact ns) and the totals."""
    events = collect_events(TraceReader(path), keep_cpu=False)
    report = analyse_kernels(events, KernelOptions(top=0, steps=steps))
    return {"rows": list(report.rows), "totals": as_json(report)["totals"]}


@pytest.mark.parametrize("path", _traces())
def test_trim_pstep_is_kernels_pstep(path: Path, tmp_path: Path) -> None:
    original = _text(path)
    steps = sorted({w.step for w in collect_events(TraceReader(path)).steps})
    if not steps:
        pytest.skip("no ProfilerStep in this trace")
    head, events, tail = _split(original)
    raw = ref.load_trace(path)[1]
    want = ref.step_devices(raw, GPU_KINDS)
    for n in steps:
        out = tmp_path / f"step{n}.json.gz"
        options = TrimOptions(steps=((n, n),))
        commands.trim(path, options, ReadOptions(quiet=True), out, force=True)
        assert _kernels(out) == _kernels(path, (n,)), f"step {n}"
        got = _kernels(out)["totals"]
        assert isinstance(got, dict)
        assert got["count"] == want[n]["kernels"], f"step {n}"
        assert round(got["total_us"] * 1000) == want[n]["kernel_time_ns"], f"step {n}"
        t_head, t_events, t_tail = _split(_text(out))
        assert (t_head, t_tail) == (head, tail)
        assert not t_events - events, f"step {n}: events not in the original, byte for byte"


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(SHARED_TRACES / "h200" / "train.json.gz", id="train"),
        pytest.param(SHARED_TRACES / "kineto__resnet50_profiler_api_nw0.json.gz", id="resnet50"),
    ],
)
def test_the_command_gaps_prints_cuts_out_that_gap(path: Path, tmp_path: Path) -> None:
    if not path.exists():
        pytest.skip("../shared/traces is absent")
    from typer.testing import CliRunner

    from traceview.analyses.gaps import GapOptions, analyse_gaps
    from traceview.cli import app

    runner = CliRunner()
    r = runner.invoke(app, ["gaps", str(path), "-q", "--largest", "2", "--no-context"])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    commands_at = lines.index(next(x for x in lines if x.startswith("Each gap as a small")))
    first = lines[commands_at + 1]
    assert first.startswith(f"#1 traceview trim {path} --window @")
    argv = first.split()[2:]  # after "#1 traceview"
    argv[argv.index("-o") + 1] = str(tmp_path / "gap1.json.gz")
    assert runner.invoke(app, [*argv, "-q"]).exit_code == 0
    whole = collect_events(TraceReader(path), keep_cpu=False)
    cut = collect_events(TraceReader(tmp_path / "gap1.json.gz"), keep_cpu=False)
    want = analyse_gaps(whole, GapOptions(largest=1, context=False)).largest[0]
    got = analyse_gaps(cut, GapOptions(largest=1, context=False)).largest[0]
    assert (got.ts_ns, got.gap_ns, got.before, got.after) == (
        want.ts_ns,
        want.gap_ns,
        want.before,
        want.after,
    )
    # the margin: 2 ms of GPU work each side (when the trace has it) is in the cut
    assert cut.gpu.ts.min() <= want.ts_ns - 1_000_000
