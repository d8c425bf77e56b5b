"""traceview summary: the per-device breakdown adds up exactly and equals simple unions on every
real trace; launch figures equal the reference; JSON shape."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import reference as ref
from conftest import SHARED_TRACES, RealTrace
from typer.testing import CliRunner

from traceview.analyses.core.graphs import GRAPH_LAUNCH
from traceview.analyses.summary import Overview, overview
from traceview.cli import app
from traceview.columns.model import TraceEvents

DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo.json.gz"


def _load(trace: RealTrace) -> tuple[list[dict[str, Any]], TraceEvents, Overview]:
    view = trace.derived("overview", lambda: overview(trace.events))
    return trace.raw, trace.events, view


COMM_NAME = re.compile(r"nccl|rccl|hccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all")
COMM_OP = ("c10d::", "nccl:", "record_param_comms")


def _comm(e: dict[str, Any], leaf: dict[int, str | None]) -> bool:
    """Communication as docs/metrics.md defines it: by the launching op, else by name."""
    op = leaf.get(id(e))
    if op is not None and op.startswith(COMM_OP):
        return True
    return COMM_NAME.search(ref.event_name(e).lower()) is not None


def test_breakdown_adds_up_and_equals_simple_unions(real_trace: RealTrace) -> None:
    raw, _, view = _load(real_trace)
    per_device = ref.busy_by_device(raw)
    leaf = {id(k): op for k, op, _ in ref.op_links(raw)}
    assert {d.device for d in view.devices} == set(per_device)
    for d in view.devices:
        members = per_device[d.device]
        copy = [e for e in members if ref.gpu_kind(e) in ("memcpy", "memset")]
        comm = [e for e in members if ref.gpu_kind(e) == "kernel" and _comm(e, leaf)]
        special = {id(e) for e in copy + comm}
        compute = [e for e in members if id(e) not in special]

        def union(events: list[dict[str, Any]]) -> int:
            return ref.union_length_ns([ref.interval_ns(e) for e in events])

        figures = ref.device_figures(members)
        assert d.window_ns == figures["window_ns"]
        assert d.compute_ns == union(compute)
        assert d.exposed_communication_ns == union(compute + comm) - union(compute)
        assert d.exposed_copy_ns == figures["busy_ns"] - union(compute + comm)
        assert d.idle_ns == figures["idle_ns"]
        assert (d.communication_ns, d.copy_ns) == (union(comm), union(copy))
        parts = d.compute_ns + d.exposed_communication_ns + d.exposed_copy_ns + d.idle_ns
        assert parts == d.window_ns
        gaps = ref.device_gaps(raw)[d.device]["gaps"]
        assert d.host_wait_ns == sum(g["host_wait_ns"] for g in gaps)
        assert d.launch_latency_ns == sum(g["launch_latency_ns"] for g in gaps)


def test_launch_figures_match_reference(real_trace: RealTrace) -> None:
    raw, _, view = _load(real_trace)
    launches = {}
    for e in raw:
        if e.get("ph") == "X" and str(e.get("cat", "")).lower() in ref.RUNTIME_CATEGORIES:
            c = ref._args(e).get("correlation")
            if c is not None and ref.ts_ns(e) is not None:
                old = launches.get(c)
                if old is None or ref.ts_ns(e) < ref.ts_ns(old):  # type: ignore[operator]
                    launches[c] = e
    delays, calls, shorter, timed, linked = [], [], 0, 0, 0
    first: dict[object, int] = {}  # a graph launch's first kernel start
    kernels = ref.gpu_events(raw, ("kernel",))
    for k in kernels:
        c = ref._args(k).get("correlation")
        launch = launches.get(c)
        if launch is None:
            continue
        linked += 1
        start = ref.interval_ns(k)[0]
        if GRAPH_LAUNCH.match(str(launch.get("name", ""))):  # a replay: counted once, below
            first[c] = min(first.get(c, start), start)
            continue
        delays.append(start - ref.ts_ns(launch))  # type: ignore[operator]
        calls.append(ref.dur_ns(launch))
        timed += 1
        shorter += ref.dur_ns(k) < ref.dur_ns(launch)
    delays += [start - ref.ts_ns(launches[c]) for c, start in first.items()]  # type: ignore[operator]
    got = view.launches
    assert (got.kernels, got.linked, got.graph_launches) == (len(kernels), linked, len(first))
    want = ref.nearest_rank(sorted(delays), 50) if delays else None
    assert got.median_queue_delay_ns == want
    assert view.as_json()["launch"]["median_delay_us"] == (None if want is None else want / 1000)
    if got.timed:  # launch calls are read with the CPU rows
        assert (got.timed, got.shorter_than_launch) == (timed, shorter)
        calls += [ref.dur_ns(launches[c]) for c in first]  # a graph launch's call once
        assert (got.calls, got.call_total_ns) == (len(calls), sum(calls))
        assert got.median_call_ns == ref.nearest_rank(sorted(calls), 50)


def test_summary_cli_shapes() -> None:
    r = CliRunner().invoke(app, ["summary", str(DEMO), "-f", "json", "--no-cache"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert set(doc) == {
        "schema_version", "trace", "devices", "top_categories", "top_kernels", "top_ops",
        "launch", "steps", "findings", "hints", "notes", "memory", "phases", "steady_state",
        "degenerate_steps", "mfu", "trust",
    }  # fmt: skip
    assert set(doc["mfu"]) == {
        "value", "peak_tflops_per_s", "peak_source", "dtype", "coverage", "convention",
        "model_flops_per_step", "tflops_per_s", "tokens_per_s", "tokens_source", "steps",
        "why_not",
    }  # fmt: skip
    assert {"median_step_time_us", "paced_by", "gpu_paced_steps"} <= set(doc["steps"])
    assert set(doc["trust"]) == {"busy_pct", "idle", "step_time", "kernel_time", "op_attribution"}
    assert doc["trust"]["kernel_time"]["trust"] == "approximate"  # the demo's 2 overlaps
    assert doc["trust"]["busy_pct"] == {"trust": "exact", "bound_us": 0.0, "reason": ""}
    assert [d["device"] for d in doc["memory"]["devices"]] == [0]  # the demo's [memory] events
    assert set(doc["devices"][0]) == {
        "device", "window_us", "compute_us", "exposed_communication_us",
        "exposed_memcpy_memset_us", "idle_us", "communication_us", "memcpy_memset_us",
        "host_wait_us", "launch_latency_us", "categories",
    }  # fmt: skip
    rules = {h["rule"] for h in doc["hints"]}
    # the demo's pageable HtoD copies are 38.9 µs of a 216.8 ms window (0.02%): no pinned-memory
    assert {"low-precision", "memory-headroom"} <= rules and "pinned-memory" not in rules
    for fmt in ("table", "md"):
        r = CliRunner().invoke(app, ["summary", str(DEMO), "-f", fmt])
        assert r.exit_code == 0, r.output
        assert "exposed communication" in r.stdout and "hint" in r.stdout
    r = CliRunner().invoke(app, ["summary", str(DEMO), "-f", "csv"])
    assert r.exit_code == 2 and "-f 'csv': expected one of table, json, md" in r.stderr


def test_a_device_without_communication_has_no_communication_term(tmp_path: Path) -> None:
    """One GPU and no collective kernel: no ``exposed communication 0.0 µs`` in its window
    line (the demo's two devices run NCCL kernels, so theirs keep it, as does JSON)."""
    train = SHARED_TRACES / "h200" / "train.json.gz"
    if not train.exists():
        pytest.skip("../shared/traces is absent")
    r = CliRunner().invoke(app, ["summary", str(train), "-q", "--no-cache"])
    assert r.exit_code == 0, r.output
    (line,) = [line for line in r.stdout.splitlines() if line.startswith("device ")]
    assert "communication" not in line
    assert re.search(r"= compute .* \+ exposed memcpy/memset .* \+ idle ", line), line
    doc = json.loads(
        CliRunner().invoke(app, ["summary", str(train), "-q", "-f", "json", "--no-cache"]).stdout
    )
    assert doc["devices"][0]["communication_us"] == 0
    assert doc["devices"][0]["exposed_communication_us"] == 0  # JSON keeps every field


def test_one_screen_words_a_duration_one_way() -> None:
    """decode.json.gz: its window line says ``host wait 2.10 s``; its hint said
    ``2,102.8 ms`` beside it. Every duration of the text is worded as the header words it."""
    decode = SHARED_TRACES / "h200" / "decode.json.gz"
    if not decode.exists():
        pytest.skip("../shared/traces is absent")
    r = CliRunner().invoke(app, ["summary", str(decode), "-q", "--no-cache"])
    assert r.exit_code == 0, r.output
    assert not re.search(r"\d,\d{3}(\.\d+)? ms", r.stdout), r.stdout
    hint = next(line for line in r.stdout.splitlines() if "many short kernels" in line)
    assert "host wait 2.10 s" in hint
