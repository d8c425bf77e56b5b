"""Nsight Systems SQLite exports: the numbers equal straight SQL over the file, a kineto trace
and its nsys form give identical reports, bad files are one line and are left untouched."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import sqlite3
from decimal import Decimal
from pathlib import Path
from typing import Any

import nsys_reference as sql
import pytest
from conftest import ROOT, SHARED_TRACES, run_cli
from nsys_writer import kineto_to_nsys, load_kineto

REAL = SHARED_TRACES / "nsys" / "testcuda__report1.sqlite.gz"
DEMO = ROOT / "fixtures" / "demo.json.gz"
# Fields of the JSON ``trace`` object that describe the file, not the activity in it.
FILE_FIELDS = ("path", "size_bytes", "events_read", "header")


def report(*args: str) -> dict[str, Any]:
    r = run_cli(*args, "-f", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)  # type: ignore[no-any-return]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real export, decompressed (skipped when ../shared/traces is absent)."""
    if not REAL.is_file():
        pytest.skip("../shared/traces/nsys is absent")
    path = tmp_path_factory.mktemp("real") / "report1.sqlite"
    path.write_bytes(gzip.decompress(REAL.read_bytes()))
    return path


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The demo trace as kineto JSON and as an nsys export. The GPU-side step annotations
    (``gpu_user_annotation``), which nsys has no counterpart for, are left out of both."""
    folder = tmp_path_factory.mktemp("pair")
    text = gzip.decompress(DEMO.read_bytes())
    text = text.replace(b'"cat": "gpu_user_annotation"', b'"cat": "left_out"')
    kineto = folder / "demo.json"
    kineto.write_bytes(text)
    nsys = folder / "demo.sqlite"
    kineto_to_nsys(load_kineto(kineto), nsys)
    return kineto, nsys


# --- the real export against straight SQL ---------------------------------------------


def test_real_kernels_equal_sql(real: Path) -> None:
    doc = report("kernels", str(real), "--top", "0", "--no-cache")
    expected = sql.kernel_stats(real)
    got = {k["name"]: k for k in doc["kernels"]}
    assert set(got) == set(expected) and expected
    for name, (count, total, lo, hi) in expected.items():
        k = got[name]
        assert (k["count"], round(k["total_us"] * 1000)) == (count, total)
        assert (round(k["min_us"] * 1000), round(k["max_us"] * 1000)) == (lo, hi)
        assert k["mean_us"] == pytest.approx(total / count / 1000, rel=1e-12)
    assert doc["totals"]["count"] == sum(v[0] for v in expected.values())


def test_real_gaps_and_busy_equal_sql(real: Path) -> None:
    expected = sql.device_busy(real)
    gaps = report("gaps", str(real), "--no-cache")
    devices = {d["device"]: d for d in gaps["devices"]}
    assert set(devices) == set(expected)
    for device, want in expected.items():
        d = devices[device]
        assert round(d["window_us"] * 1000) == want["window"]
        assert round(d["busy_us"] * 1000) == want["busy"]
        assert d["gaps"] == len(want["gaps"])
        assert round(d["gap_total_us"] * 1000) == sum(want["gaps"])
    assert gaps["totals"]["gaps"] == sum(len(w["gaps"]) for w in expected.values())
    kernels = report("kernels", str(real), "--no-cache")
    for d in kernels["trace"]["devices"]:
        assert round(d["busy_us"] * 1000) == expected[d["device"]]["busy"]


def test_real_header_and_steps(real: Path) -> None:
    db = sql.connect(real)
    gpus = sorted(r[0] for r in db.execute("SELECT name FROM TARGET_INFO_GPU"))
    epoch = db.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()[0]
    has_nvtx = "NVTX_EVENTS" in sql.tables(db)
    db.close()
    doc = report("steps", str(real), "--no-cache")
    assert doc["trace"]["device_names"] == gpus
    assert doc["trace"]["header"]["baseTimeNanoseconds"] == epoch
    assert doc["trace"]["time_resolution"] == "ns"
    assert not has_nvtx and doc["steps"] == []  # this export has no NVTX ranges


def test_reading_leaves_the_file_and_its_folder_alone(real: Path) -> None:
    before, listing = digest(real), sorted(p.name for p in real.parent.iterdir())
    first = report("gaps", str(real))  # through the cache: hashed, read, stored
    second = report("gaps", str(real))  # from the cache
    assert first == second
    assert digest(real) == before
    assert sorted(p.name for p in real.parent.iterdir()) == listing  # no -journal, -wal, -shm


# --- a kineto trace and its nsys form ---------------------------------------------------


# What comes from record_shapes, which an nsys export does not carry: left out of comparisons.
_STEP_FIGURES_FROM_SHAPES = (
    "model_flops",
    "mfu",
    "tflops_per_s",
    "flops_coverage",
    "tokens",
    "tokens_source",
)


def _activity(doc: dict[str, Any]) -> dict[str, Any]:
    trace = doc.get("trace")
    if isinstance(trace, dict):
        for key in FILE_FIELDS:
            trace.pop(key)
    doc.pop("mfu", None)
    for step in doc.get("steps", []) if isinstance(doc.get("steps"), list) else []:
        for key in _STEP_FIGURES_FROM_SHAPES:
            step.pop(key, None)
    if isinstance(doc.get("notes"), list):
        doc["notes"] = [n for n in doc["notes"] if not n.startswith("MFU")]
    return doc


@pytest.mark.parametrize(
    "args",
    [
        ["kernels", "--top", "0"],
        ["kernels", "--include", "kernel,memcpy,memset", "--pstep", "6-8", "--top", "0"],
        ["gaps", "--largest", "0"],
        ["gaps", "--pstep", "7", "--busy", "kernel"],
        ["steps"],
    ],
    ids=["kernels", "kernels-pstep-all-kinds", "gaps", "gaps-pstep", "steps"],
)
def test_round_trip_reports_are_identical(pair: tuple[Path, Path], args: list[str]) -> None:
    kineto, nsys = pair
    command, options = args[0], args[1:]
    want = _activity(report(command, str(kineto), *options, "--no-cache"))
    got = _activity(report(command, str(nsys), *options, "--no-cache"))
    assert got == want


def test_round_trip_steps_equal_sql(pair: tuple[Path, Path]) -> None:
    _, nsys = pair
    expected = sql.step_kernels(nsys)
    doc = report("steps", str(nsys), "--no-cache")
    got = {s["step"]: (s["kernels"], round(s["kernel_time_us"] * 1000)) for s in doc["steps"]}
    assert got == expected and len(expected) >= 5


def test_missing_tables_are_empty(pair: tuple[Path, Path], tmp_path: Path) -> None:
    """nsys creates a table only when it holds data; the enums have defaults."""
    _, nsys = pair
    copy = tmp_path / "fewer.sqlite"
    shutil.copy(nsys, copy)
    db = sqlite3.connect(copy)
    for table in ("NVTX_EVENTS", "ENUM_CUDA_MEMCPY_OPER", "ENUM_CUDA_MEM_KIND", "TARGET_INFO_GPU"):
        db.execute(f"DROP TABLE {table}")
    db.commit()
    db.close()
    args = ("kernels", "--include", "kernel,memcpy,memset", "--top", "0", "--no-cache")
    full, fewer = report(*args[:1], str(nsys), *args[1:]), report(*args[:1], str(copy), *args[1:])
    assert fewer["kernels"] == full["kernels"]
    assert fewer["trace"]["device_names"] == [] and full["trace"]["device_names"]
    steps = report("steps", str(copy), "--no-cache")
    assert steps["steps"] == []


def test_strings_only_export_reads_as_empty(tmp_path: Path) -> None:
    path = tmp_path / "empty.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
    db.commit()
    db.close()
    doc = report("kernels", str(path), "--no-cache")
    assert doc["totals"]["count"] == 0 and doc["kernels"] == []


# --- bad files: one line, exit 1, untouched ---------------------------------------------


def _not_nsys(path: Path, _: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()


def _truncated(path: Path, good: Path) -> None:
    path.write_bytes(good.read_bytes()[: good.stat().st_size // 2])


def _corrupt(path: Path, good: Path) -> None:
    """The kernel table's root page overwritten: the header is fine, the data is not."""
    db = sqlite3.connect(f"file:{good}?mode=ro", uri=True)
    page = db.execute("PRAGMA page_size").fetchone()[0]
    sql_root = "SELECT rootpage FROM sqlite_master WHERE name = 'CUPTI_ACTIVITY_KIND_KERNEL'"
    root = db.execute(sql_root).fetchone()[0]
    db.close()
    data = bytearray(good.read_bytes())
    data[(root - 1) * page : root * page] = b"\x55" * page
    path.write_bytes(bytes(data))


def _gzipped(path: Path, good: Path) -> None:
    path.write_bytes(gzip.compress(good.read_bytes()))


def _wal(path: Path, good: Path) -> None:
    shutil.copy(good, path)
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode = WAL").fetchone()[0] == "wal"
    db.close()


def _report(path: Path, _: Path) -> None:
    path.write_bytes(b"\x00\x01NSYS-ish binary report, not SQLite\xff" * 10)


BAD = {
    "not an nsys export": ("plain.sqlite", _not_nsys, "not an Nsight Systems export"),
    "truncated": ("cut.sqlite", _truncated, "truncated SQLite database"),
    "corrupt": ("bad.sqlite", _corrupt, "database disk image is malformed"),
    "gzip": ("report.sqlite.gz", _gzipped, "gzip-compressed SQLite database"),
    "wal": ("wal.sqlite", _wal, "WAL mode"),
    "nsys-rep": ("report1.nsys-rep", _report, "nsys export --type sqlite"),
}


def assert_untouched_error(r: Any, fragment: str) -> None:
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1, r.stderr
    assert len(lines) == 1 and lines[0].startswith("traceview: error: "), r.stderr
    assert fragment in lines[0] and "Traceback" not in r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize("command", ["kernels", "gaps", "steps"])
@pytest.mark.parametrize("kind", sorted(BAD))
def test_bad_file_is_one_line_and_untouched(
    pair: tuple[Path, Path], tmp_path: Path, command: str, kind: str
) -> None:
    name, make, fragment = BAD[kind]
    folder = tmp_path / "in"
    folder.mkdir()
    path = folder / name
    make(path, pair[1])
    before, listing = digest(path), sorted(p.name for p in folder.iterdir())
    assert_untouched_error(run_cli(command, str(path)), fragment)
    assert digest(path) == before
    assert sorted(p.name for p in folder.iterdir()) == listing


def test_locked_database_is_one_line(pair: tuple[Path, Path], tmp_path: Path) -> None:
    path = tmp_path / "locked.sqlite"
    shutil.copy(pair[1], path)
    # Digests outside the lock: closing any descriptor of the file drops this process's
    # POSIX locks on it, SQLite's included.
    before = digest(path)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # as a writer holds it
    try:
        listing = sorted(p.name for p in tmp_path.iterdir())
        assert_untouched_error(run_cli("kernels", str(path)), "database is locked")
        assert sorted(p.name for p in tmp_path.iterdir()) == listing
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert digest(path) == before


def test_sqlite_named_like_a_report_is_read_by_content(
    pair: tuple[Path, Path], tmp_path: Path
) -> None:
    path = tmp_path / "really.nsys-rep"
    shutil.copy(pair[1], path)
    assert report("kernels", str(path), "--no-cache")["totals"]["count"] > 0


@pytest.mark.parametrize("low", [0, -5], ids=["packed", "row-sort"])
def test_interned_rows_get_one_id_per_distinct_row(low: int) -> None:
    """Both ways of finding the distinct rows (packed keys, a row sort) against a dict."""
    import numpy as np

    from traceview.columns.intern import Interner
    from traceview.columns.nsys import _interned

    rng = np.random.default_rng(7)
    keys = rng.integers(low, 4, size=(500, 2), dtype=np.int64)
    interner = Interner()
    interner.id("taken")  # ids already handed out stay as they are
    ids = _interned(keys, interner, lambda k: k)
    assert [interner.values[i] for i in ids] == [tuple(map(int, k)) for k in keys]
    assert len(interner) == 1 + len({tuple(k) for k in keys.tolist()})


def test_odd_rows_are_skipped_and_counted(tmp_path: Path) -> None:
    """NULLs where nsys may leave them, an end before the start, a range never closed."""
    from nsys_writer import PUSH_POP, Writer, gtid

    path = tmp_path / "odd.sqlite"
    w = Writer(path)
    name = w.sid("k")
    w.insert(
        "CUPTI_ACTIVITY_KIND_KERNEL",
        [(100, 200, 0, 1, 7, None, 1, name, name, 32, 1, 1),  # no correlation
         (300, 250, 0, 1, 7, 2, 1, name, name, 32, 1, 1),  # ends before it starts
         (400, 450, 0, 1, 7, 3, 1, name, name, 32, 1, 1)],
    )  # fmt: skip
    w.insert("CUPTI_ACTIVITY_KIND_MEMCPY", [(500, 600, 0, 1, 7, 4, 1, 8, 1, None, None)])
    w.insert("CUPTI_ACTIVITY_KIND_RUNTIME", [(390, 395, 0, gtid(1, 2), 3, w.sid("cudaX_v1"), 0)])
    w.insert(
        "NVTX_EVENTS",
        [(0, 1000, PUSH_POP, None, "ProfilerStep#3", gtid(1, 2), None),
         (10, None, PUSH_POP, None, "ProfilerStep#4", gtid(1, 2), None)],
    )  # fmt: skip
    w.close()
    r = run_cli("kernels", str(path), "--include", "kernel,memcpy", "-f", "json", "--no-cache")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    counts = {k["name"]: (k["count"], k["total_us"]) for k in doc["kernels"]}
    assert counts == {"k": (2, 0.15), "Memcpy HtoD (Unknown -> Unknown)": (1, 0.1)}
    warnings = doc["trace"]["warnings"]
    assert "1 events skipped: ts or dur not a finite number, or dur negative" in warnings
    assert "1 NVTX ranges without an end (left out)" in warnings
    # k at 100 has no launch and starts before the first launched kernel (docs/metrics.md
    # "Launched before the trace"): in no step; the copy at 500 has none either
    assert "1 GPU activities were launched before the trace began" in " ".join(warnings)
    assert "1 GPU activities have no matching launch event" in " ".join(warnings)
    steps = report("steps", str(path), "--no-cache")["steps"]
    assert [(s["step"], s["kernels"]) for s in steps] == [(3, 1)]


def _as_values(events: Any) -> dict[str, Any]:
    """TraceEvents with ids replaced by the names, streams and threads they stand for."""
    names, streams, threads = events.names, events.streams, events.threads
    gpu, rt = events.gpu, events.runtime
    cpu = [
        (threads[r["thread"]], names[r["name"]], int(r["ts"]), int(r["end"]), int(r["correlation"]))
        for block in events.cpu.blocks()
        for r in block
    ]
    return {
        "gpu": list(
            zip(
                gpu.kind.tolist(),
                [names[i] for i in gpu.name],
                [streams[i] for i in gpu.stream],
                gpu.ts.tolist(),
                gpu.dur.tolist(),
                gpu.correlation.tolist(),
                strict=True,
            )
        ),
        "runtime": sorted(zip(rt.correlation.tolist(), rt.ts.tolist(), strict=True)),
        "cpu": cpu,
        "steps": events.steps,
        "span": events.span_ns,
        "quality": events.quality,
        "cpu_quality": events.cpu_quality,
        "rows": events.read.events,
    }


@pytest.mark.parametrize("keep_cpu", [False, True])
def test_worker_read_equals_the_serial_read(
    pair: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, keep_cpu: bool
) -> None:
    """The runtime and NVTX tables read by a forked worker give the serial result."""
    from traceview.columns import nsys as nsys_events

    serial = _as_values(nsys_events.collect_nsys(pair[1], keep_cpu))
    parts: list[Any] = []
    result = nsys_events._HostWorker.result
    monkeypatch.setattr(
        nsys_events._HostWorker, "result", lambda self: parts.append(result(self)) or parts[-1]
    )
    monkeypatch.setenv("TRACEVIEW_NSYS_SPLIT_MIN_ROWS", "0")
    split = _as_values(nsys_events.collect_nsys(pair[1], keep_cpu))
    assert len(parts) == 1 and parts[0] is not None  # the worker's part was used
    assert split == serial
    assert len(split["cpu"]) > 1000 if keep_cpu else split["cpu"] == []


def test_worker_error_is_the_error(
    pair: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bad data in a table the worker reads is the same one-line error."""
    from traceview.columns.nsys import collect_nsys
    from traceview.errors import TraceviewError

    path = tmp_path / "bad-runtime.sqlite"
    db = sqlite3.connect(f"file:{pair[1]}?mode=ro", uri=True)
    page = db.execute("PRAGMA page_size").fetchone()[0]
    sql_root = "SELECT rootpage FROM sqlite_master WHERE name = 'CUPTI_ACTIVITY_KIND_RUNTIME'"
    root = db.execute(sql_root).fetchone()[0]
    db.close()
    data = bytearray(pair[1].read_bytes())
    data[(root - 1) * page : root * page] = b"\x55" * page
    path.write_bytes(bytes(data))
    monkeypatch.setenv("TRACEVIEW_NSYS_SPLIT_MIN_ROWS", "0")
    with pytest.raises(TraceviewError, match="malformed"):
        collect_nsys(path)


@pytest.fixture(scope="module")
def ops_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """As ``pair``, without user annotations too: nsys has one kind of NVTX range, which
    traceview takes as operators, so only a trace whose CPU ranges are all cpu_ops has the same
    operators in both forms."""
    folder = tmp_path_factory.mktemp("ops_pair")
    doc = load_kineto(DEMO)
    doc["traceEvents"] = [
        e
        for e in doc["traceEvents"]
        if e.get("cat") not in ("gpu_user_annotation", "user_annotation")
        or (
            str(e.get("name", "")).startswith("ProfilerStep#")
            and e.get("cat") != "gpu_user_annotation"
        )
    ]
    kineto = folder / "demo.json"
    kineto.write_text(_dumps(doc))
    nsys = folder / "demo.sqlite"
    kineto_to_nsys(load_kineto(kineto), nsys)
    return kineto, nsys


def _dumps(value: Any) -> str:
    """JSON with Decimal numbers written as they were read (exact ns timestamps)."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_dumps(v) for v in value) + "]"
    return json.dumps(value)


@pytest.mark.parametrize("level", ["leaf", "top"])
def test_round_trip_ops_are_identical(ops_pair: tuple[Path, Path], level: str) -> None:
    kineto, nsys = ops_pair
    args = ("--level", level, "--top", "0", "--no-cache")
    want = _activity(report("ops", str(kineto), *args))
    got = _activity(report("ops", str(nsys), *args))
    assert _without_shapes(got["ops"]) == _without_shapes(want["ops"]) and len(want["ops"]) > 10
    assert all(r[k] is None for r in got["ops"] for k in _FROM_SHAPES)
    assert got["totals"] == want["totals"]


_FROM_SHAPES = ("flops", "bytes", "dtype", "tflops_per_s", "tb_per_s", "intensity")


def _without_shapes(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The op rows without the figures computed from Input Dims (and the peak of their dtype),
    a compute/memory bound read as none. NVTX ranges carry no Input Dims: an nsys export's rows
    never have them (checked here on every call)."""
    drop = {*_FROM_SHAPES, "peak_tflops_per_s", "pct_of_peak", "above_peak"}
    out = []
    for r in rows:
        if all(r[k] is None for k in _FROM_SHAPES):  # no shapes: no compute or memory bound
            assert r["bound"] in (None, "launch", "communication"), r
            assert r["above_peak"] is False, r  # no FLOP rate to be above a peak
        bound = r["bound"] if r["bound"] in ("launch", "communication") else None
        out.append({**{k: v for k, v in r.items() if k not in drop}, "bound": bound})
    return out


def test_round_trip_summary_is_identical(ops_pair: tuple[Path, Path]) -> None:
    kineto, nsys = ops_pair
    want = report("summary", str(kineto), "--no-cache")
    got = report("summary", str(nsys), "--no-cache")
    for key in ("devices", "top_categories", "top_kernels", "launch", "steps"):
        assert got[key] == want[key], key
    assert _without_shapes(got["top_ops"]) == _without_shapes(want["top_ops"])
    assert all(r[k] is None for r in got["top_ops"] for k in _FROM_SHAPES)


def test_real_summary_equals_sql(real: Path) -> None:
    """The real export has no NVTX: every kernel is in the (no op) row, and the device's window
    splits into compute, memcpy and idle as straight SQL says."""
    doc = report("summary", str(real), "--no-cache")
    (device,) = doc["devices"]
    db = sqlite3.connect(f"file:{real}?mode=ro", uri=True)
    kernels = db.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall()
    copies = db.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY").fetchall()
    db.close()

    def union(spans: list[tuple[int, int]]) -> int:
        total, reach = 0, None
        for start, end in sorted(s for s in spans if s[1] > s[0]):
            if reach is None or start > reach:
                total += end - start
                reach = end
            elif end > reach:
                total += end - reach
                reach = end
        return total

    busy = [s for s in kernels + copies if s[1] > s[0]]
    window = max(e for _, e in busy) - min(s for s, _ in busy)
    assert round(device["window_us"] * 1000) == window
    assert round(device["compute_us"] * 1000) == union(kernels)
    assert round(device["exposed_memcpy_memset_us"] * 1000) == union(busy) - union(kernels)
    assert round(device["idle_us"] * 1000) == window - union(busy)
    ops = report("ops", str(real), "--no-cache", "--top", "0")
    assert [o["name"] for o in ops["ops"]] == ["(no op)"]
    assert ops["ops"][0]["kernels"] == len(kernels)
