"""traceview energy: nvidia-smi log parsing (headers, zones, offsets), integrals known exactly,
an independent per-ns integration, real traces under a generated log, and the command."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta, timezone
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import reference
from conftest import run_cli, trace_params

from traceview.analyses.energy import attribute, base_ns, integrate
from traceview.columns.parallel import collect_events
from traceview.columns.power import INSTANT, parse_zone, read_power_log
from traceview.columns.schema import KERNEL
from traceview.errors import TraceviewError, UsageError
from traceview.read.reader import TraceReader

MS = 10**6
T0 = 1_714_557_600 * 10**9  # 2024-05-01 10:00:00 UTC


def _stamp(ns: int, tz: timezone = UTC) -> str:
    moment = datetime.fromtimestamp(ns // 10**9, tz) + timedelta(microseconds=ns % 10**9 // 1000)
    return f"{moment:%Y/%m/%d %H:%M:%S}.{moment.microsecond // 1000:03d}"


def _log(
    path: Path,
    samples: list[tuple[int, int, str]],
    header: str = "timestamp, index, power.draw [W]",
    unit: str = " W",
    tz: timezone = UTC,
) -> Path:
    """A log of (epoch ns, gpu, watts text) rows, in header order timestamp, index, power."""
    lines = [header] + [f"{_stamp(t, tz)}, {g}, {w}{unit}" for t, g, w in samples]
    path.write_text("\n".join(lines) + "\n")
    return path


def _read(path: Path, tz: str | None = "UTC", offset_ns: int = 0) -> Any:
    zone, text = parse_zone(tz)
    return read_power_log(path, zone, text, offset_ns)


# ---------------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("header", "unit", "row"),
    [
        ("timestamp, index, power.draw [W]", " W", None),
        ("timestamp, index, power.draw", "", None),  # nounits, bare header
        ("index, power.draw [W], timestamp", " W", "{g}, {w} W, {t}"),
        ("name, timestamp, power.draw.instant [W], index, power.draw [W]", " W",
         "NVIDIA H100, {t}, {w} W, {g}, 1.00 W"),
    ],
)  # fmt: skip
def test_header_variants(tmp_path: Path, header: str, unit: str, row: str | None) -> None:
    samples = [(T0, 0, "100.25"), (T0 + 40 * MS, 1, "187.5")]
    path = tmp_path / "log.csv"
    if row is None:
        _log(path, samples, header, unit)
    else:
        lines = [header] + [row.format(t=_stamp(t), g=g, w=w) for t, g, w in samples]
        path.write_text("\n".join(lines) + "\n")
    log = _read(path)
    assert log.t_ns.tolist() == [T0, T0 + 40 * MS]
    assert log.gpu.tolist() == [0, 1]
    assert log.mw.tolist() == [100_250, 187_500]
    assert log.column == (INSTANT if "instant" in header else "power.draw")


def test_bad_rows_are_skipped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "log.csv"
    path.write_text(
        "timestamp, index, power.draw [W]\n"
        f"{_stamp(T0)}, 0, 100.00 W\n"
        f"{_stamp(T0)}, 0, [N/A]\n"
        "garbage\n"
        f"{_stamp(T0 + MS)}, 0, 50 W\n"
    )
    log = _read(path)
    assert log.mw.tolist() == [100_000, 50_000] and log.skipped == 2


def test_not_a_power_log(tmp_path: Path) -> None:
    path = tmp_path / "log.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(TraceviewError, match="no timestamp column"):
        _read(path)


@pytest.mark.parametrize(
    ("tz", "offset_h"),
    [("UTC", 0), ("+02:00", 2), ("-05:30", -5.5), ("Asia/Kolkata", 5.5), ("Europe/Paris", 2)],
)
def test_time_zones(tmp_path: Path, tz: str, offset_h: float) -> None:
    local = timezone(timedelta(hours=offset_h))
    path = _log(tmp_path / "log.csv", [(T0, 0, "100")], tz=local)  # May: Paris is UTC+2
    assert _read(path, tz).t_ns.tolist() == [T0]


def test_offset_and_bad_zone(tmp_path: Path) -> None:
    path = _log(tmp_path / "log.csv", [(T0, 0, "100")])
    assert _read(path, "UTC", -250 * MS).t_ns.tolist() == [T0 - 250 * MS]
    with pytest.raises(UsageError):
        parse_zone("Mars/Olympus")
    with pytest.raises(UsageError):
        parse_zone("+25:00")


# ------------------------------------------------------------------------- exact integrals


def _integrate(activities: list[tuple[int, int]], samples: list[tuple[int, int]]) -> Any:
    start = np.array([a for a, _ in activities], dtype=np.int64)
    end = np.array([b for _, b in activities], dtype=np.int64)
    t = np.array([s for s, _ in samples], dtype=np.int64)
    mw = np.array([p for _, p in samples], dtype=np.int64)
    return integrate(start, end, t, mw)


def test_constant_power() -> None:
    # 100 W; kernels of 1 ms and 2 ms with 1 ms idle between: 0.1 J, 0.2 J, idle 0.1 J.
    result = _integrate([(0, MS), (2 * MS, 4 * MS)], [(-5 * MS, 100_000), (10 * MS, 100_000)])
    assert result.activity_pj.tolist() == [10**11, 2 * 10**11]
    assert (result.busy_pj, result.idle_pj) == (3 * 10**11, 10**11)


def test_steps_at_sample_boundaries() -> None:
    # 100 W then 300 W from 1 ms: a kernel over [0, 2 ms) gets 0.1 + 0.3 J.
    result = _integrate([(0, 2 * MS)], [(0, 100_000), (MS, 300_000), (2 * MS, 0)])
    assert result.activity_pj.tolist() == [4 * 10**11]
    assert result.idle_pj == 0


def test_overlapping_kernels_share_power() -> None:
    # 90 W; A [0, 3 ms), B [1 ms, 2 ms): A alone 2 ms, both 1 ms, shared in halves.
    result = _integrate([(0, 3 * MS), (MS, 2 * MS)], [(0, 90_000)])
    assert result.activity_pj.tolist() == [90_000 * (2 * MS) + 45_000 * MS, 45_000 * MS]
    assert result.busy_pj == 90_000 * 3 * MS


def test_remainders_keep_the_sum_exact() -> None:
    # 1 mW over 1 ns shared by three: 1 pJ cannot be split evenly, it still adds up.
    result = _integrate([(0, 1), (0, 1), (0, 1)], [(0, 1)])
    assert sorted(result.activity_pj.tolist()) == [0, 0, 1]
    assert result.busy_pj == 1


@pytest.mark.parametrize("seed", range(40))
def test_against_a_walk_over_every_ns(seed: int) -> None:
    rng = random.Random(seed)
    activities = []
    for _ in range(rng.randint(1, 7)):
        a = rng.randint(0, 120)
        activities.append((a, a + rng.randint(1, 40)))
    times = sorted({0, *(rng.randint(1, 170) for _ in range(rng.randint(0, 8)))})
    samples = [(t, rng.randint(0, 400_000)) for t in times]
    exact, busy, idle = reference.energy_per_ns(activities, samples)
    result = _integrate(activities, samples)
    assert (result.busy_pj, result.idle_pj) == (busy, idle)
    assert int(result.activity_pj.sum()) == busy
    bound = len(activities) * (len(samples) + 2 * len(activities))
    for got, want in zip(result.activity_pj.tolist(), exact, strict=True):
        assert abs(Fraction(got) - want) <= bound  # pJ: integer shares of exact fractions


# ------------------------------------------------------------------------------ real traces


def _covering_log(path: Path, events: Any, devices: list[Any]) -> Path:
    """Samples every 40 ms on GPUs 0..7 from before the trace to after it, power varying."""
    base = base_ns(events)
    t0 = base + int(events.gpu.ts.min()) - 50 * MS
    t1 = base + int((events.gpu.ts + events.gpu.dur).max()) + 50 * MS
    rows = []
    for i, t in enumerate(range(t0 - t0 % MS, t1 + 40 * MS, 40 * MS)):
        rows += [(t, g, f"{100 + (i * 7 + g) % 50}.{i % 100:02d}") for g in range(8)]
    return _log(path, rows)


def _reference_device(
    events: Any, log: Any, device_rows: np.ndarray, index: int
) -> tuple[int, int]:
    """Total and busy energy (pJ) of one device: a step integral over the samples, and over
    the union of its activities merged one by one (no traceview code)."""
    base = base_ns(events)
    spans = sorted(
        (base + int(events.gpu.ts[r]), base + int(events.gpu.ts[r] + events.gpu.dur[r]))
        for r in device_rows.tolist()
    )
    samples = [(int(t), int(p)) for g, t, p in zip(log.gpu, log.t_ns, log.mw, strict=True)
               if g == index]  # fmt: skip

    def integral(a: int, b: int) -> int:
        total = 0
        for i, (t, p) in enumerate(samples):
            nxt = samples[i + 1][0] if i + 1 < len(samples) else b
            lo, hi = max(a, t), min(b, nxt)
            total += p * max(0, hi - lo)
        return total

    merged: list[list[int]] = []
    for a, b in spans:
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    busy = sum(integral(a, b) for a, b in merged)
    return integral(spans[0][0], max(b for _, b in spans)), busy


@pytest.mark.parametrize("path", trace_params())
def test_real_traces_add_up(path: Path, tmp_path: Path) -> None:
    events = collect_events(TraceReader(path))
    if not len(events.gpu.ts) or not (events.gpu.dur > 0).any():
        pytest.skip("no GPU activity with a duration")
    from traceview.analyses.core.devices import device_of_stream

    index, values = device_of_stream(events)
    if not all(isinstance(v, int) and 0 <= v < 8 for v in values):
        pytest.skip("devices not numbered 0-7")
    log = _read(_covering_log(tmp_path / "log.csv", events, values))
    report = attribute(events, log, {})
    active = events.gpu.dur > 0
    assert int(report.row_pj[~active].sum()) == 0
    for d in report.devices:
        rows = np.flatnonzero(active & (index[events.gpu.stream] == values.index(d.device)))
        assert d.kernel_pj + d.copy_pj == int(report.row_pj[rows].sum()) == d.busy_pj
        assert d.kernel_pj == int(report.row_pj[rows[events.gpu.kind[rows] == KERNEL]].sum())
        assert d.busy_pj + d.idle_pj == d.energy_pj
        assert (d.energy_pj, d.busy_pj) == _reference_device(events, log, rows, d.gpu_index)
        assert d.coverage_pct == 100.0
    assert sum(k.energy_pj for k in report.kernels) == sum(d.busy_pj for d in report.devices)
    assert sum(k.count for k in report.kernels) == int(active.sum())


# ------------------------------------------------------------------------------ the command


def _trace(path: Path, base: int | None = None, relative: bool = True) -> Path:
    """Kernels on device 0 at 0-1 ms and 2-4 ms after T0: ts relative to ``base`` when there
    is one (as kineto writes), else epoch µs (also with a base when not ``relative``)."""
    origin = 0 if base is not None and relative else T0 // 1000
    kernels = [
        {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": origin + ts,
         "dur": dur, "args": {"device": 0, "stream": 7}}
        for name, ts, dur in (("gemm_a", 0, 1000), ("relu_b", 2000, 2000))
    ]  # fmt: skip
    doc: dict[str, Any] = {"traceEvents": kernels}
    if base is not None:
        doc["baseTimeNanoseconds"] = base
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(("base", "relative"), [(None, False), (T0, True), (10**18, False)])
def test_cli_json(tmp_path: Path, base: int | None, relative: bool) -> None:
    trace = _trace(tmp_path / "t.json", base, relative)
    log = _log(tmp_path / "log.csv", [(T0 - 10 * MS, 0, "100.00"), (T0 + 10 * MS, 0, "100")])
    r = run_cli("energy", str(trace), "--power", str(log), "--power-tz", "UTC", "-f", "json",
                "--top", "0", "--no-cache")  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema_version"] == 1
    (device,) = doc["devices"]
    assert set(device) >= {"device", "window_us", "energy_j", "busy_energy_j", "idle_energy_j",
                           "mean_power_w", "coverage_pct"}  # fmt: skip
    assert (device["window_us"], device["energy_j"]) == (4000, 0.4)
    assert (device["busy_energy_j"], device["idle_energy_j"]) == (0.3, 0.1)
    assert device["mean_power_w"] == pytest.approx(100)
    assert [(k["name"], k["count"], k["energy_j"]) for k in doc["kernels"]] == [
        ("relu_b", 1, 0.2), ("gemm_a", 1, 0.1)
    ]  # fmt: skip
    assert "power.draw, a 1 s average" in r.stderr
    assert "not a measurement" in r.stderr and "trace window 2024-05-01 10:00:00.000" in r.stderr


def test_cli_refuses_a_log_that_does_not_cover(tmp_path: Path) -> None:
    trace = _trace(tmp_path / "t.json")
    log = _log(tmp_path / "log.csv", [(T0 + MS, 0, "100"), (T0 + 10 * MS, 0, "100")],
               "timestamp, index, power.draw.instant [W]")  # fmt: skip
    r = run_cli("energy", str(trace), "--power", str(log), "--power-tz", "UTC", "--no-cache")
    assert r.returncode == 1
    assert "does not cover device 0" in r.stderr
    assert "2024-05-01 10:00:00.000 – 2024-05-01 10:00:00.004" in r.stderr  # the trace
    assert "log 2024-05-01 10:00:00.001 – 2024-05-01 10:00:00.010" in r.stderr
    shifted = run_cli("energy", str(trace), "--power", str(log), "--power-tz", "UTC",
                      "--power-offset", "-2ms", "--no-cache")  # fmt: skip
    assert shifted.returncode == 0, shifted.stderr
    assert "1 s average" not in shifted.stderr  # power.draw.instant


def test_cli_gpu_map_and_zone_note(tmp_path: Path) -> None:
    trace = _trace(tmp_path / "t.json")
    log = _log(tmp_path / "log.csv", [(T0 - MS, 3, "50"), (T0 + 10 * MS, 3, "50")],
               tz=timezone(timedelta(hours=2)))  # fmt: skip
    r = run_cli("energy", str(trace), "--power", str(log), "--power-tz", "+02:00",
                "--power-gpu", "3=0", "-f", "csv", "--no-cache")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1].startswith("kernel,relu_b,1,0.1,50.0")
    assert "timestamps read in +02:00" in r.stderr
    bad = run_cli("energy", str(trace), "--power", str(log), "--power-gpu", "x", "--no-cache")
    assert bad.returncode == 2


def test_unique_with_power_has_energy(tmp_path: Path) -> None:
    trace = _trace(tmp_path / "t.json")
    log = _log(tmp_path / "log.csv", [(T0 - MS, 0, "100"), (T0 + 10 * MS, 0, "100")])
    out = tmp_path / "k.jsonl"
    r = run_cli("unique", str(trace), "--power", str(log), "--power-tz", "UTC", "-o", str(out),
                "--no-cache")  # fmt: skip
    assert r.returncode == 0, r.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(x["name"], x["energy_j"], x["tier"]) for x in records] == [
        ("relu_b", 0.2, 3), ("gemm_a", 0.1, 2)
    ]  # fmt: skip
    table = run_cli("unique", str(trace), "--power", str(log), "--power-tz", "UTC", "--no-cache")
    assert table.returncode == 0, table.stderr
    header, _, *rows = table.stdout.splitlines()
    assert "Energy J" in header.split("  ")
    energy = header.index("Energy J") + len("Energy J")
    assert [row[:energy].split()[-1] for row in rows] == ["0.200", "0.100"]
    plain = run_cli("unique", str(trace), "--no-cache")
    assert "Energy J" not in plain.stdout  # no power log, no column


@pytest.mark.parametrize(
    ("joules", "shown"),
    [(242.0831, "242"), (19.4484, "19.4"), (5.0442, "5.04"), (0.00962, "0.00962"),
     (1234.5, "1,234"), (0.0, "0"), (-3.21, "-3.21")],
)  # fmt: skip
def test_energy_is_shown_to_three_significant_digits(joules: float, shown: str) -> None:
    """A power log read every ~100 ms tells no kernel's energy to 4 decimals of a joule."""
    from traceview.render.units import joules as joules_text

    assert joules_text(joules) == shown


def test_trace_without_gpu_activity(tmp_path: Path) -> None:
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 5}
    ]}))  # fmt: skip
    log = _log(tmp_path / "log.csv", [(T0, 0, "100")])
    r = run_cli("energy", str(trace), "--power", str(log), "-f", "json", "--no-cache")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"schema_version": 1, "devices": [], "kernels": []}
    assert "no energy to attribute" in r.stderr
    table = run_cli("unique", str(trace), "--no-cache")
    assert table.returncode == 0 and "no GPU kernels recorded" in table.stdout


@pytest.mark.parametrize(
    ("stamps", "expected_ns"),
    [
        (["2024/05/01 10:00:00.5", "2024-05-01T10:00:01"], [T0 + 500 * MS, T0 + 1000 * MS]),
        (
            ["2024/05/01 10:00:00.123456", "2024/05/01 10:00:00.000001"],
            [T0 + 1000, T0 + 123_456_000],
        ),
        (["2024/05/01 10:00:00.250", "2024/05/01 10:00:00.999"], [T0 + 250 * MS, T0 + 999 * MS]),
        (["2024/05/01 10:00:00.250", "2024/05/01 10:00:0x.999"], [T0 + 250 * MS]),
    ],
)
def test_timestamp_layouts(tmp_path: Path, stamps: list[str], expected_ns: list[int]) -> None:
    path = tmp_path / "log.csv"
    rows = [f"{s}, 0, 10.5 W" for s in stamps]
    path.write_text("timestamp, index, power.draw [W]\n" + "\n".join(rows) + "\n")
    log = _read(path)
    assert log.t_ns.tolist() == expected_ns
    assert log.skipped == len(stamps) - len(expected_ns)


def test_a_recorded_zone_needs_no_power_tz(tmp_path: Path) -> None:
    """traceview record writes the logger's zone in .record.json beside power.csv: energy and
    unique --power read it there (here +05:00, which no machine zone of the tests is); an
    explicit --power-tz still wins, and a .record.json naming another log is not used."""
    from traceview.app.recorded import write_power_zone

    trace = _trace(tmp_path / "trace.json")
    log = _log(tmp_path / "power.csv", [(T0 - MS, 0, "100"), (T0 + 10 * MS, 0, "100")],
               tz=timezone(timedelta(hours=5)))  # fmt: skip
    plain = run_cli("energy", str(trace), "--power", str(log), "-f", "json", "--no-cache")
    assert plain.returncode == 1 and "does not cover" in plain.stderr  # the machine's zone
    write_power_zone(tmp_path, "power.csv", "+05:00")
    r = run_cli("energy", str(trace), "--power", str(log), "-f", "json", "--no-cache")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["devices"][0]["energy_j"] == 0.4
    assert "read in +05:00 (recorded by traceview record in .record.json)" in r.stderr
    out = tmp_path / "k.jsonl"
    r = run_cli("unique", str(trace), "--power", str(log), "-o", str(out), "--no-cache")
    assert r.returncode == 0, r.stderr
    given = run_cli("energy", str(trace), "--power", str(log), "--power-tz", "UTC", "--no-cache")
    assert given.returncode == 1 and "does not cover" in given.stderr
    write_power_zone(tmp_path, "other.csv", "+05:00")
    r = run_cli("energy", str(trace), "--power", str(log), "--no-cache")
    assert r.returncode == 1 and "does not cover" in r.stderr  # the machine's zone again
