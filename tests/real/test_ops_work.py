"""The operator view's new figures on every real trace and on hand-made ones: CPU self time
against a stack walk, FLOPs per row against per-call formulas written out in
tests/reference.py, the peaks look-up and the bound."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import reference as ref
from conftest import ROOT, SHARED_TRACES, RealTrace
from hypothesis import given
from hypothesis import strategies as st
from test_oplinks import _load  # the raw events and the CPU-keeping read, cached

from traceview.analyses.core.opcalls import parents
from traceview.analyses.ops.peaks import device_peaks, load_peaks_file
from traceview.analyses.ops.view import OpOptions, analyse_ops
from traceview.analyses.ops.work import bound
from traceview.choices import OpGroupBy
from traceview.errors import UsageError


def test_cpu_total_and_self_time_per_op(real_trace: RealTrace) -> None:
    raw, events = _load(real_trace)
    calls = ref.cpu_op_calls(raw)
    spans = [((e.get("pid"), e.get("tid")), *ref.interval_ns(e)) for e in calls]
    self_ns = ref.self_times_ns(spans)
    want: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for e, (_, ts, end), own in zip(calls, spans, self_ns, strict=True):
        row = want[ref.event_name(e)]
        row[0] += 1
        row[1] += end - ts
        row[2] += own
    report = analyse_ops(events, OpOptions(top=0))
    for r in report.rows:
        if r.name != "(no op)":
            assert [r.calls, r.cpu_time_ns, r.cpu_self_ns] == want[r.name], r.name


def test_flops_per_row_match_the_calls(real_trace: RealTrace) -> None:
    raw, events = _load(real_trace)
    report = analyse_ops(events, OpOptions(top=0))
    per_name: dict[str, list[Any]] = defaultdict(list)
    for e in ref.cpu_op_calls(raw):
        per_name[ref.event_name(e)].append(ref.op_flops_bytes(ref.event_name(e), e.get("args", {})))
    for r in report.rows:
        works = per_name.get(r.name, [])
        if not works or any(w is None for w in works):
            continue  # the reference covers fewer ops; unknown there is not checked
        assert (r.flops, r.bytes) == (sum(w[0] for w in works), sum(w[1] for w in works)), r.name


def test_op_plus_shapes_rows_add_up_to_the_op_rows(real_trace: RealTrace) -> None:
    _, events = _load(real_trace)
    by_op = analyse_ops(events, OpOptions(top=0))
    by_shape = analyse_ops(events, OpOptions(top=0, group_by=OpGroupBy.OP_SHAPES))
    sums: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in by_shape.rows:
        sums[r.name][0] += r.kernels
        sums[r.name][1] += r.gpu_time_ns
    assert {r.name: [r.kernels, r.gpu_time_ns] for r in by_op.rows} == dict(sums)
    assert by_shape.gpu_time_ns == by_op.gpu_time_ns


def test_h100_bert_roofline_fields() -> None:
    path = SHARED_TRACES / "tracelens__h100__gaunernst_bert-small-uncased__1016001.json.gz"
    if not path.is_file():
        pytest.skip("../shared/traces is absent")
    trace = RealTrace(path)
    report = analyse_ops(_load(trace)[1], OpOptions(top=0))
    doc = report.as_json()
    assert doc["device"]["device"] == "H100 SXM"
    addmm = next(r for r in doc["ops"] if r["name"] == "aten::addmm")
    raw = _load(trace)[0]
    calls = [e for e in ref.cpu_op_calls(raw) if ref.event_name(e) == "aten::addmm"]
    works = [ref.op_flops_bytes("aten::addmm", e["args"]) for e in calls]
    assert len(works) == 26 and None not in works
    assert addmm["flops"] == sum(w[0] for w in works if w) == 8_029_194_240
    assert addmm["dtype"] == "c10::BFloat16" and addmm["peak_tflops_per_s"] == 989.5
    assert addmm["tflops_per_s"] == pytest.approx(addmm["flops"] / addmm["gpu_busy_us"] / 1e6)
    assert addmm["intensity"] == pytest.approx(addmm["flops"] / addmm["bytes"])
    ridge = 989.5 / 3.35
    assert addmm["bound"] == ("compute" if addmm["intensity"] >= ridge else "memory")


def _nested(draw: Any) -> list[tuple[int, int, int]]:
    """Properly nested calls on 1–3 threads, from random opens and closes."""
    out: list[tuple[int, int, int]] = []
    for thread in range(draw(st.integers(1, 3))):
        now, stack = 0, []
        for step in draw(st.lists(st.integers(0, 5), max_size=30)):
            now += step // 2
            if step % 2 == 0 or not stack:
                stack.append((thread, now))
            else:
                out.append((*stack.pop(), now))
        out += [(*s, now) for s in stack]
    return out


@given(st.data())
def test_parents_match_a_stack_walk(data: st.DataObject) -> None:
    calls = data.draw(st.builds(lambda c: c, st.just(None)).flatmap(lambda _: st.composite(
        lambda draw: _nested(draw))()))  # fmt: skip
    order = data.draw(st.permutations(range(len(calls))))
    calls = [calls[i] for i in order]  # file order need not be time order
    thread, ts, end = (np.array([c[i] for c in calls], dtype=np.int64) for i in range(3))
    parent = parents(thread, ts, end)
    child = np.zeros(len(calls), dtype=np.int64)
    np.add.at(child, parent[parent >= 0], (end - ts)[parent >= 0])
    assert (end - ts - child).tolist() == ref.self_times_ns(calls)


def test_peaks_by_name_then_by_compute_capability() -> None:
    props = {"name": "NVIDIA A100-SXM4-80GB", "computeMajor": 8, "computeMinor": 0, "numSms": 108}
    peaks, note = device_peaks({"deviceProperties": [props]})
    assert peaks is not None and peaks.tb_per_s == 2.039 and peaks.tflops["bf16"] == 312.0
    mi300 = {"name": "AMD Radeon Graphics", "computeMajor": 9, "computeMinor": 4, "numSms": 304}
    peaks, note = device_peaks({"deviceProperties": [mi300]})
    assert peaks is not None and peaks.device == "MI300X" and "compute capability" in peaks.source
    a100 = {**props, "name": ""}  # four A100 entries share 8.0 / 108 SMs: none chosen
    peaks, note = device_peaks({"deviceProperties": [a100]})
    assert peaks is None and note is not None and "--peaks" in note
    peaks, note = device_peaks({})
    assert peaks is None and note is not None


def test_peaks_file_overrides_and_is_checked(tmp_path: Path) -> None:
    good = tmp_path / "p.toml"
    good.write_text('[[devices]]\nnames = ["NVIDIA H100 80GB HBM3"]\ntb_per_s = 3.0\n'
                    '[devices.tflops]\nbf16 = 800.0\n')  # fmt: skip
    entries = load_peaks_file(good)
    peaks, _ = device_peaks({"deviceProperties": [{"name": "NVIDIA H100 80GB HBM3"}]}, entries)
    assert peaks is not None and peaks.tflops == {"bf16": 800.0} and peaks.tb_per_s == 3.0
    for text in ('{"devices": [{"tflops": {"bf17": 1}}]}', "[1]", '{"devices": []}', "{"):
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        with pytest.raises(UsageError, match="--peaks"):
            load_peaks_file(bad)
    anything = tmp_path / "any.json"
    anything.write_text(json.dumps({"devices": [{"tflops": {"fp32": 10}, "tb_per_s": 1}]}))
    peaks, _ = device_peaks({"deviceProperties": [{"name": "?"}]}, load_peaks_file(anything))
    assert peaks is not None and peaks.tflops == {"fp32": 10.0}


def test_bound_rule() -> None:
    assert bound(True, 10, 100, None, None, None, None) == "communication"
    assert bound(False, 10, 100, 10**9, 10**6, 100.0, 1.0) == "launch"
    assert bound(False, 1000, 100, 10**9, 10**6, 100.0, 1.0) == "compute"  # 1000 ≥ 100
    assert bound(False, 1000, 100, 10**9, 10**8, 100.0, 1.0) == "memory"  # 10 < 100
    assert bound(False, 1000, 100, None, 10**8, 100.0, 1.0) is None
    assert bound(False, 1000, 100, 10**9, 10**8, None, 1.0) is None


def test_note_on_rows_above_the_peak() -> None:
    """The demo's fp32 GEMMs run faster than the H100's fp32 peak (on TF32 tensor cores): a note
    says so; a trace whose rows stay below their peak has no such note."""
    demo = analyse_ops(_load(RealTrace(ROOT / "fixtures" / "demo.json.gz"))[1], OpOptions(top=0))
    over = [r for r in demo.rows if r.pct_of_peak is not None and r.pct_of_peak > 100]
    assert over and over[0].dtype == "float"
    # their FLOP rates are above the fp32 peak: flagged in the row and named in a note each
    assert all(r.above_peak and r.tflops_per_s > r.peak_tflops_per_s for r in over)
    assert [n for n in demo.notes if "TFLOP/s peak of float" in n] == [
        f"{r.name}: {r.tflops_per_s:.2f} TFLOP/s is above the {r.peak_tflops_per_s:g} TFLOP/s"
        " peak of float on this GPU, so it is not a speed: its FLOPs may be counted twice (ops"
        " nested in a way the trace does not show), the op may run in another dtype than its"
        " inputs (fp32 on TF32 tensor cores), or the peaks are not this GPU's (--peaks)"
        for r in over
    ]
    assert not any("above 100% of the peak" in n for n in demo.notes)
    assert all(not r.above_peak for r in demo.rows if r not in over)
    bert = SHARED_TRACES / "tracelens__h100__gaunernst_bert-small-uncased__1016001.json.gz"
    if not bert.exists():
        pytest.skip("../shared/traces is absent")
    report = analyse_ops(_load(RealTrace(bert))[1], OpOptions(top=0))
    assert all(r.pct_of_peak is None or r.pct_of_peak <= 100 for r in report.rows)
    assert any(r.pct_of_peak is not None for r in report.rows)
    assert not any("above 100%" in n for n in report.notes)
