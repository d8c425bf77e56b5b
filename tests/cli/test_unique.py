"""traceview unique: launch configurations, grouping against tests/reference.py on every real
trace, each branch of the tier rule, and the command's outputs."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import reference
from conftest import RealTrace, run_cli, trace_params

from traceview.analyses.unique import tier_of, unique_kernels
from traceview.columns.launches import NO_LAUNCH, normalise, raw_key
from traceview.columns.parallel import collect_events
from traceview.columns.schema import KERNEL, MEMCPY, MEMSET
from traceview.read.reader import TraceReader


def _read(path: Path) -> Any:
    return collect_events(TraceReader(path), keep_cpu=True)


def _dims(value: list[int] | None) -> tuple[int, ...] | None:
    return None if value is None else tuple(value)


@pytest.mark.parametrize("path", trace_params())
def test_grouping_matches_reference_on_real_traces(path: Path) -> None:
    report = unique_kernels(_read(path))
    _, events = reference.load_trace(path)
    expected = reference.unique_groups(events)
    from traceview.analyses.unique import launch_fields

    got = {}
    for k in report.kernels:
        f = launch_fields(k)
        if k.kind == "kernel":
            key = (k.kind, k.name, _dims(f["grid"]), _dims(f["block"]),
                   f["registers_per_thread"], f["shared_memory"])  # fmt: skip
        else:
            key = (k.kind, k.name, f["bytes"])
        got[key] = (k.count, k.total_ns, k.min_ns, k.max_ns)
    want = {key: (len(d), sum(d), min(d), max(d)) for key, d in expected.items()}
    assert got == want
    assert sum(k.count for k in report.kernels) == report.activities
    assert report.activities == sum(len(d) for d in expected.values())
    assert all(k.tier == 1 for k in report.kernels if k.kind != "kernel")
    assert all(k.tier in (2, 3) for k in report.kernels if k.kind == "kernel")
    totals = [k.total_ns for k in report.kernels]
    assert totals == sorted(totals, reverse=True)


@pytest.mark.parametrize(
    ("kind", "name", "by_matmul", "tier"),
    [
        (MEMCPY, "Memcpy HtoD (Pageable -> Device)", False, 1),
        (MEMSET, "Memset (Device)", True, 1),
        (KERNEL, "ampere_sgemm_128x128_nt", False, 2),
        (KERNEL, "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm>(Params)", False, 2),
        (KERNEL, "nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT", False, 2),
        (KERNEL, "Cijk_Alik_Bljk_HHS_BH_MT128x128x32", False, 2),
        (KERNEL, "Tensile_kernel_xyz", False, 2),
        (KERNEL, "void gemv2T_kernel_val<int, int, float>", False, 2),
        (KERNEL, "void at::native::vectorized_elementwise_kernel<4>", True, 2),
        (KERNEL, "void at::native::vectorized_elementwise_kernel<4>", False, 3),
        (KERNEL, "triton_poi_fused_add_0", False, 3),
    ],
)
def test_tier_rule(kind: int, name: str, by_matmul: bool, tier: int) -> None:
    assert tier_of(kind, name, by_matmul) == tier


def _kernel(name: str, ts: int, corr: int, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": 5,
            "args": {"device": 0, "stream": 7, "correlation": corr, **args}}  # fmt: skip


def _launched(op: str, ts: int, corr: int) -> list[dict[str, Any]]:
    return [
        {"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": ts, "dur": 10},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": ts + 1, "dur": 2, "args": {"correlation": corr}},
    ]  # fmt: skip


def test_matmul_op_makes_tier_2_and_launch_config_splits(tmp_path: Path) -> None:
    launch = {"grid": [4, 1, 1], "block": [128, 1, 1], "registers per thread": 32,
              "shared memory": 0}  # fmt: skip
    events = [
        *_launched("aten::mm", 0, 1),
        _kernel("elementwise_thing", 20, 1, **launch),
        *_launched("aten::add", 100, 2),
        _kernel("elementwise_thing", 120, 2, **launch),
        *_launched("aten::add", 200, 3),
        _kernel("elementwise_thing", 220, 3, **{**launch, "grid": [8, 1, 1]}),
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD", "pid": 0, "tid": 7, "ts": 300,
         "dur": 3, "args": {"device": 0, "stream": 7, "bytes": 64}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD", "pid": 0, "tid": 7, "ts": 310,
         "dur": 3, "args": {"device": 0, "stream": 7, "bytes": 128}},
    ]  # fmt: skip
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    report = unique_kernels(_read(path))
    assert report.activities == 5 and len(report.kernels) == 4
    by = {(k.name, k.launch[0], k.launch[-1]): k for k in report.kernels}
    grid4 = by["elementwise_thing", 4, -1]
    assert grid4.count == 2 and grid4.tier == 2  # one of its launches came from aten::mm
    assert grid4.op in ("aten::mm", "aten::add")
    assert by["elementwise_thing", 8, -1].tier == 3
    assert by["elementwise_thing", 8, -1].op == "aten::add"
    assert {by["Memcpy DtoD", -1, 64].tier, by["Memcpy DtoD", -1, 128].tier} == {1}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            {
                "grid": [8, 16, 5],
                "block": [128, 1, 1],
                "registers per thread": 122,
                "shared memory": 12544,
            },
            (8, 16, 5, 128, 1, 1, 122, 12544, -1),
        ),
        (
            {"grid": "[8, 1, 1]", "block": "[64]", "shared memory": "2049000"},
            (8, 1, 1, 64, 1, 1, -1, 2049000, -1),
        ),
        ({"grid": [1.0, 2, 3], "registers per thread": 32.0}, (1, 2, 3, -1, -1, -1, 32, -1, -1)),
        ({"grid": [True, 1, 1], "block": [1, 1, 1, 1], "bytes": -4}, NO_LAUNCH),
        ({"grid": [[1], 1, 1], "block": {"x": 1}, "bytes": 1.5}, NO_LAUNCH),
        ({"bytes": 2**70}, NO_LAUNCH),
        ({"bytes": Decimal("64.0"), "grid": [Decimal("2"), 1, 1]}, (2, 1, 1) + (-1,) * 5 + (64,)),
        ({"bytes": float("nan"), "registers per thread": Decimal("Infinity")}, NO_LAUNCH),
        ({"bytes": 512}, (-1,) * 8 + (512,)),
    ],
)
def test_launch_values_are_checked(args: dict[str, Any], expected: tuple[int, ...]) -> None:
    from traceview.columns.launches import _hashable

    fields = {"grid": None, "block": None, "registers": None, "shared_memory": None,
              "bytes": None}  # fmt: skip
    fields.update({"registers": args.get("registers per thread"),
                   "shared_memory": args.get("shared memory")})  # fmt: skip
    fields.update({k: v for k, v in args.items() if k in ("grid", "block", "bytes")})
    key = raw_key(SimpleNamespace(**fields))
    try:
        hash(key)
    except TypeError:
        key = _hashable(key)
    assert normalise(key) == expected


def test_hostile_launch_args_do_not_drop_events(tmp_path: Path) -> None:
    events = [
        _kernel("k", 0, 1, grid=[[1, 2]], block={"a": [1]}),
        _kernel("k", 10, 2, grid="[2, 2, 2]", block=[32, 1, 1]),
        _kernel("k", 20, 3),
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    report = unique_kernels(_read(path))
    assert report.activities == 3
    assert sorted(k.launch[:3] for k in report.kernels) == [(-1, -1, -1), (2, 2, 2)]


def test_cli_writes_json_lines_and_summary(tmp_path: Path) -> None:
    trace = tmp_path / "t.json"
    out = tmp_path / "kernels.jsonl"
    events = [_kernel("a", 0, 1, grid=[1, 1, 1]), _kernel("a", 10, 2, grid=[2, 1, 1]),
              _kernel("b", 20, 3)]  # fmt: skip
    trace.write_text(json.dumps({"traceEvents": events}))
    r = run_cli("unique", str(trace), "-o", str(out), "-f", "json", "--no-cache")
    assert r.returncode == 0, r.stderr
    assert "3 activities → 3 unique (tier 1: 0, tier 2: 0, tier 3: 3)" in r.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 3
    assert set(lines[0]) >= {
        "schema_version", "kind", "name", "short_name", "grid", "block", "registers_per_thread",
        "shared_memory", "bytes", "count", "total_us", "mean_us", "min_us", "max_us", "devices",
        "streams", "category", "op", "tier",
    }  # fmt: skip
    assert json.loads(r.stdout)["kernels"] == [
        {k: v for k, v in line.items() if k != "schema_version"} for line in lines
    ]
    again = run_cli("unique", str(trace), "-o", str(out), "--no-cache")
    assert again.returncode == 2 and "exists" in again.stderr
    csv = run_cli("unique", str(trace), "-f", "csv", "--no-cache")
    assert csv.returncode == 0 and csv.stdout.count("\n") == 4
    md = run_cli("unique", str(trace), "-f", "md", "--no-cache")
    rows = [line for line in md.stdout.splitlines() if line.startswith("| ")]
    assert md.returncode == 0 and len(rows) == 4  # the header and three records
    bad = run_cli("unique", str(trace), "-f", "html", "--no-cache")
    assert bad.returncode == 2 and "-f 'html': expected one of" in bad.stderr


def _unique_json(events: Any) -> str:
    from traceview.render.unique import as_json

    return json.dumps(as_json(unique_kernels(events)), sort_keys=True)


def test_parallel_read_equals_serial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from conftest import load_generator

    path = tmp_path / "gen.json"
    load_generator().main([str(path), "--steps", "3", "--hostile-names"])
    reads = []
    for parallel in (True, False):
        monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", "1" if parallel else str(1 << 60))
        reader = TraceReader(path, block_size=64 << 10)
        events = collect_events(reader, keep_cpu=True)
        reads.append((_unique_json(events), events.read.resume_at))
    assert reads[0][1] is not None  # really read in two parts
    assert reads[0][0] == reads[1][0]
    assert json.loads(reads[0][0])["per_tier"]["2"] > 0


def test_cold_equals_warm(tmp_path: Path) -> None:
    from conftest import load_generator

    path = tmp_path / "gen.json"
    load_generator().main([str(path), "--steps", "2"])
    cold = run_cli("unique", str(path), "-f", "json", "--no-cache")
    assert cold.returncode == 0, cold.stderr
    for _ in range(2):  # fills the cache, then reads from it
        warm = run_cli("unique", str(path), "-f", "json")
        assert warm.stdout == cold.stdout


def test_nsys_export_launch_columns(tmp_path: Path) -> None:
    import gzip
    import sqlite3

    from conftest import SHARED_TRACES

    source = SHARED_TRACES / "nsys" / "testcuda__report1.sqlite.gz"
    if not source.is_file():
        pytest.skip(f"{source} is absent")
    path = tmp_path / "report.sqlite"
    path.write_bytes(gzip.decompress(source.read_bytes()))
    with sqlite3.connect(path) as db:
        kernels = db.execute(
            "SELECT gridX, gridY, gridZ, blockX, blockY, blockZ, registersPerThread, "
            "staticSharedMemory + dynamicSharedMemory, COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL "
            "GROUP BY 1, 2, 3, 4, 5, 6, 7, 8"
        ).fetchall()
        copies = db.execute(
            "SELECT bytes, COUNT(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY copyKind, bytes"
        ).fetchall()  # a copy's name is its kind
    from traceview.columns.nsys import collect_nsys

    report = unique_kernels(collect_nsys(path, keep_cpu=True))
    got_kernels = sorted((*k.launch[:8], k.count) for k in report.kernels if k.kind == "kernel")
    got_copies = sorted((k.launch[8], k.count) for k in report.kernels if k.kind == "memcpy")
    assert got_kernels == sorted(kernels)
    assert [c for _, c in got_copies] and got_copies == sorted(copies)


def test_input_dims_are_those_of_a_call_of_the_launching_op(real_trace: RealTrace) -> None:
    """A record's Input Dims / Input type are those of some call of its op in the trace; None
    when no call of that op carries them, or when there is no op."""
    report = unique_kernels(real_trace.events)
    shapes: dict[str, set[str]] = {}
    for e in reference.cpu_op_calls(real_trace.raw):
        args = e.get("args", {})
        dims = args.get("Input Dims", args.get("Input dims"))
        if dims is not None and args.get("Input type") is not None:
            key = json.dumps([dims, args["Input type"]])
            shapes.setdefault(reference.event_name(e), set()).add(key)
    for k in report.kernels:
        if k.op == "" or k.op not in shapes:
            assert k.input_dims is None and k.input_types is None, k.name
        else:
            assert json.dumps([k.input_dims, k.input_types]) in shapes[k.op], (k.name, k.op)


@pytest.mark.parametrize("split", [False, True])
def test_a_split_read_gives_the_serial_read_s_shapes(
    split: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read split in two processes interns the calls' shapes in another order than a serial
    one: the shape shown for a kernel (ties between equally common calls) must not follow it.
    On h200/train several kernels' ops have tied shapes (before the tie went by shape id, the
    split read showed others)."""
    from conftest import SHARED_TRACES

    path = SHARED_TRACES / "h200" / "train.json.gz"
    if not path.exists():
        pytest.skip("../shared/traces/h200/train.json.gz is absent")
    monkeypatch.setenv("TRACEVIEW_SPLIT", "fork")
    shown = []
    for min_bytes in ("1" if split else str(1 << 60), str(1 << 60)):
        monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", min_bytes)
        events = _read(path)
        assert (events.read.resume_at is not None) == (split and len(shown) == 0)
        shown.append(
            [(k.name, k.input_dims, k.input_types) for k in unique_kernels(events).kernels]
        )
    assert shown[0] == shown[1]
