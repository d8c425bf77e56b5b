"""Serving step markers, one small trace per marker style: the steps found, their phase from
the marker's words or from the step's shape, degenerate steps, --phase, the steady state."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import traceview
from traceview.analyses.core.phase_figures import steady_state
from traceview.analyses.core.steps import StepDevice, StepRow
from traceview.errors import UsageError
from traceview.render.steps import notes

Event = dict[str, Any]


def x(cat: str, name: str, ts: float, dur: float, **args: Any) -> Event:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
            "args": args}  # fmt: skip


def launched(ts: float, corr: int, dur: float = 50, name: str = "k") -> list[Event]:
    """A kernel launched at ``ts`` (cudaLaunchKernel), running ``dur`` µs 10 µs later."""
    kernel = x("kernel", name, ts + 10, dur, correlation=corr, device=0, stream=7)
    return [x("cuda_runtime", "cudaLaunchKernel", ts, 5, correlation=corr),
            {**kernel, "pid": 0, "tid": 7}]  # fmt: skip


def write(tmp_path: Path, events: list[Event]) -> Path:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def marked(names: list[str], dur: float = 500) -> list[Event]:
    """One step range per name, 1 ms apart, each launching two kernels."""
    events: list[Event] = []
    for n, name in enumerate(names):
        t = 1000.0 * n
        events += [x("user_annotation", name, t, dur), *launched(t + 10, 2 * n + 1)]
        events += launched(t + 20, 2 * n + 2)
    return events


def steps(path: Path) -> list[dict[str, Any]]:
    report = traceview.open(path, cache=False).steps()
    return [r.as_dict() for r in report.rows]


def test_sglang_markers_give_steps_with_phase_batch_and_tokens(tmp_path: Path) -> None:
    names = ["step[EXTEND bs=2 toks=300]", "step[DECODE bs=2]", "step[DECODE bs=2]",
             "step[MIXED bs=3 toks=40]", "step[IDLE bs=0]"]  # fmt: skip
    events = marked(names)
    events.reverse()  # numbered in start order, not file order
    got = [(s["step"], s["name"], s["phase"], s["batch"], s["tokens"], s["kernels"])
           for s in steps(write(tmp_path, events))]  # fmt: skip
    assert got == [
        (0, "step[EXTEND bs=2 toks=300]", "prefill", 2, 300, 2),
        (1, "step[DECODE bs=2]", "decode", 2, 2, 2),  # a decode step: a token per sequence
        (2, "step[DECODE bs=2]", "decode", 2, 2, 2),
        (3, "step[MIXED bs=3 toks=40]", "mixed", 3, 40, 2),
        (4, "step[IDLE bs=0]", "unknown", 0, None, 2),
    ]


def test_execute_ranges_tell_prefill_decode_and_mixed(tmp_path: Path) -> None:
    names = [
        "execute_2_context_2(sq300sk300sqsq45000sqsk45000)_generation_0(sq0sk0sqsq0sqsk0)",
        "execute_2_context_0(sq0sk0sqsq0sqsk0)_generation_2(sq2sk302sqsq2sqsk302)",
        "execute_3_context_1(sq10sk10sqsq100sqsk100)_generation_2(sq2sk304sqsq2sqsk304)",
        "execute_context_1(888_788544)_generation_0(0)",  # no <n>_, tokens first
    ]
    got = [(s["phase"], s["batch"], s["tokens"]) for s in steps(write(tmp_path, marked(names)))]
    assert got == [("prefill", 2, 300), ("decode", 2, 2), ("mixed", 3, 12), ("prefill", 1, 888)]


def test_vllm_execute_model_frames_are_steps_with_phase_from_shape(tmp_path: Path) -> None:
    events: list[Event] = []
    for n, q in enumerate([7, 1, 1]):  # a prefill of 7 tokens, then two decode steps
        t = 1000.0 * n
        frame = "vllm/v1/worker/gpu_model_runner.py(3380): execute_model"
        dims = {"Input Dims": [[2, 4, q, 16], [2, 4, q + n, 16], [2, 4, q + n, 16]]}
        sdpa = x("cpu_op", "aten::scaled_dot_product_attention", t + 5, 100, **dims)
        events += [x("python_function", frame, t, 500), sdpa, *launched(t + 10, n + 1)]
    events.append(x("python_function", "vllm/worker.py(12): execute_model_fast", 0, 3000))
    got = [(s["name"], s["phase"]) for s in steps(write(tmp_path, events))]
    frame = "vllm/v1/worker/gpu_model_runner.py(3380): execute_model"
    assert got == [(frame, "prefill"), (frame, "decode"), (frame, "decode")]


def test_hf_generate_forwards_are_steps_prefill_then_decode(tmp_path: Path) -> None:
    events: list[Event] = []
    for n, q in enumerate([5, 1, 1]):  # the prompt's forward, then a forward per new token
        t = 1000.0 * n
        dims = {"Input Dims": [[4, 12, q, 64], [4, 12, 5 + n, 64], [4, 12, 5 + n, 64]]}
        events += [
            x("python_function", f"nn.Module: GPT2LMHeadModel_{n}", t, 500),
            x("python_function", "nn.Module: GPT2Attention_0", t + 2, 100),  # not a step
            x("cpu_op", "aten::scaled_dot_product_attention", t + 5, 90, **dims),
            *launched(t + 10, n + 1),
        ]
    got = [(s["name"], s["phase"]) for s in steps(write(tmp_path, events))]
    assert got == [("nn.Module: GPT2LMHeadModel_0", "prefill"),
                   ("nn.Module: GPT2LMHeadModel_1", "decode"),
                   ("nn.Module: GPT2LMHeadModel_2", "decode")]  # fmt: skip


def test_the_first_marker_style_in_the_table_wins(tmp_path: Path) -> None:
    """SGLang traces carry both its step[...] and an execute_ range around it: one style."""
    events = marked(["step[DECODE bs=2]"])
    events.append(x("user_annotation", "execute_2_context_0(sq0)_generation_2(sq2)", 0, 900))
    assert [s["name"] for s in steps(write(tmp_path, events))] == ["step[DECODE bs=2]"]


@pytest.mark.parametrize(
    "name",
    [
        "mystep[DECODE bs=2]",
        "step[decode]",
        "execute_model_fast",
        "prestep[DECODE bs=2]x",
        "execute_1_context_1(\x1b[31m)_generation_0(sq0)",  # hostile text is never a label
        "<b>/gpu_model_runner.py(1): execute_model",
    ],
)
def test_names_that_only_contain_a_marker_are_no_step(tmp_path: Path, name: str) -> None:
    assert steps(write(tmp_path, marked([name]))) == []


def test_profiler_steps_win_and_step_regex_overrides(tmp_path: Path) -> None:
    events = marked(["step[DECODE bs=2]", "step[DECODE bs=2]"])
    events += [x("user_annotation", "ProfilerStep#7", 0, 1900)]
    path = write(tmp_path, events)
    assert [(s["name"], s["phase"]) for s in steps(path)] == [("ProfilerStep#7", "unknown")]
    t = traceview.open(path, cache=False, step_regex=r"step\[DECODE bs=(\d)\]")
    assert [r.step for r in t.steps().rows] == [2]  # both ranges: step 2


def test_phase_from_shape_capture_and_training(tmp_path: Path) -> None:
    events: list[Event] = []
    for n in range(3):
        t = 1000.0 * n
        events += [x("user_annotation", f"ProfilerStep#{n}", t, 500), *launched(t + 10, n + 1)]
    sdpa = {"Input Dims": [[2, 4, 1, 16], [2, 4, 9, 16], [2, 4, 9, 16]]}
    events += [
        x("cuda_runtime", "cudaStreamBeginCapture", 20, 2, correlation=90),
        x("cpu_op", "aten::scaled_dot_product_attention", 1020, 5, **sdpa),
        x("cpu_op", "aten::scaled_dot_product_attention", 2020, 5, **sdpa),
        x("cpu_op", "autograd::engine::evaluate_function: MmBackward0", 2100, 5),
    ]
    got = [s["phase"] for s in steps(write(tmp_path, events))]
    assert got == ["capture", "decode", "unknown"]  # the backward op: training, no phase


@pytest.mark.parametrize(
    ("kernels", "phase"),
    [
        (
            [
                "fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausalP16VarSeqQ128Kv128PersistentContext"
            ],
            "prefill",
        ),
        (["paged_attention_ll4mi_QKV_mfma16_kernel"], "decode"),
        (["fmhaContextKernel", "vllm::paged_attention_v2_kernel<float>"], "mixed"),
        (["fmha_kernel_contextual", "pagedattention", "flash_fwd_kernel"], "unknown"),
    ],
)
def test_phase_from_the_attention_kernel_family(
    tmp_path: Path, kernels: list[str], phase: str
) -> None:
    events = [x("user_annotation", "ProfilerStep#0", 0, 500)]
    for n, name in enumerate(kernels):
        events += launched(10 + 20 * n, n + 1, name=name)
    assert [s["phase"] for s in steps(write(tmp_path, events))] == [phase]


def test_a_training_step_takes_no_phase_from_kernel_names(tmp_path: Path) -> None:
    events = [x("user_annotation", "ProfilerStep#0", 0, 500), *launched(10, 1, name="fmhaContext")]
    events.append(x("cpu_op", "autograd::engine::evaluate_function: MmBackward0", 100, 5))
    assert [s["phase"] for s in steps(write(tmp_path, events))] == ["unknown"]


def test_a_feedbackward_name_is_no_backward_op(tmp_path: Path) -> None:
    events = [x("user_annotation", "ProfilerStep#0", 0, 500), *launched(10, 1)]
    events += [
        x("cpu_op", "aten::scaled_dot_product_attention", 20, 5,
          **{"Input Dims": [[1, 2, 64, 8], [1, 2, 64, 8], [1, 2, 64, 8]]}),
        x("cpu_op", "feedbackward_net", 30, 5),
    ]  # fmt: skip
    assert [s["phase"] for s in steps(write(tmp_path, events))] == ["prefill"]


def test_degenerate_steps(tmp_path: Path) -> None:
    events = marked(["step[DECODE bs=2]"] * 3)
    events += [x("user_annotation", "step[DECODE bs=2]", 3000, 100)]  # no GPU work
    events += [x("user_annotation", "step[DECODE bs=2]", 4000, 900)]
    events += launched(4010, 50, dur=5000) + launched(4020, 51, dur=10)  # one giant kernel
    events += [x("user_annotation", "step[DECODE bs=2]", 6000, 500)]
    events += launched(6010, 60)
    events.append(x("cuda_runtime", "cudaLaunchKernel", 6100, 5, correlation=61))  # no kernel
    path = write(tmp_path, events)
    got = [s["degenerate"] for s in steps(path)]
    assert got == [None, None, None, "empty", "single giant kernel", "cut by the trace's end"]
    said = [n for n in notes(list(traceview.open(path, cache=False).steps().rows)) if "degen" in n]
    assert said == [
        "step 3 (step[DECODE bs=2]) is degenerate: empty",
        "step 4 (step[DECODE bs=2]) is degenerate: single giant kernel",
        "step 5 (step[DECODE bs=2]) is degenerate: cut by the trace's end",
    ]


def test_steps_of_a_cpu_only_trace_are_one_note(tmp_path: Path) -> None:
    events = [x("user_annotation", f"ProfilerStep#{i}", 1000 * i, 500) for i in range(3)]
    path = write(tmp_path, events)
    assert [s["degenerate"] for s in steps(path)] == ["empty"] * 3
    said = [n for n in notes(list(traceview.open(path, cache=False).steps().rows)) if "degen" in n]
    assert said == ["no step ran GPU work: all 3 steps are degenerate: empty"]


def test_a_launch_without_its_kernel_before_the_last_step_is_no_cut(tmp_path: Path) -> None:
    events = marked(["step[DECODE bs=2]"] * 2)
    events.append(x("cuda_runtime", "cudaLaunchKernel", 100, 5, correlation=99))  # step 0
    events.append(x("cuda_runtime", "cudaMemsetAsync", 1100, 5, correlation=98))  # no launch
    assert [s["degenerate"] for s in steps(write(tmp_path, events))] == [None, None]


def test_phase_selects_the_gpu_work_of_its_steps(tmp_path: Path) -> None:
    events = marked(["step[EXTEND bs=2 toks=300]", "step[DECODE bs=2]", "step[DECODE bs=2]"])
    t = traceview.open(write(tmp_path, events), cache=False)
    from traceview.analyses.core.step_markers import in_phase

    decode = in_phase(t._read(), "decode")
    assert len(decode.gpu.ts) == 4 and [s.step for s in decode.steps] == [1, 2]
    with pytest.raises(
        UsageError, match=r"no mixed step in this trace \(phases found: decode, prefill"
    ):
        in_phase(t._read(), "mixed")


def row(step: int, start: int, dur: int, phase: str = "decode", tokens: int | None = 4) -> StepRow:
    device = StepDevice(0, start, start + dur, dur, 0, 0)
    return StepRow(step, start, start + dur, 1, 1, (device,), False, phase=phase, tokens=tokens)


def test_steady_state_is_the_longest_run_within_tolerance() -> None:
    rows = [row(0, 0, 500, "warmup"), row(1, 1000, 100), row(2, 1100, 100), row(3, 1200, 300)]
    rows += [row(4, 1500, 100), row(5, 1600, 110), row(6, 1710, 95), row(7, 1805, 100, "prefill")]
    st = steady_state(rows, include_warmup=False)
    assert st is not None
    assert (st.first_step, st.last_step, st.steps, st.duration_ns) == (4, 6, 3, 305)
    assert st.steps_per_s == pytest.approx(3 / 305e-9)
    assert st.tokens_per_s == pytest.approx(12 / 305e-9)


def test_a_count_beyond_int64_is_absent_with_a_note(tmp_path: Path) -> None:
    """``step[DECODE bs=<26 digits>]``: the JSON holds null and says why, never an internal
    error; an ``execute_…`` range's counts likewise."""
    huge = "1" * 26
    names = [f"step[DECODE bs={huge}]", "step[DECODE bs=4]"]
    path = write(tmp_path, marked(names))
    rows = steps(path)
    assert [(r["batch"], r["tokens"]) for r in rows] == [(None, None), (4, 4)]
    document = traceview.open(path, cache=False).steps().to_json()
    assert json.dumps(document)  # serialisable
    assert (
        "step 0: a count in the marker's name is beyond int64: read as absent (null)"
        in (document["notes"])
    )
    execute = f"execute_{huge}_context_0(sq0)_generation_{huge}(sq{huge})"
    (row,) = steps(write(tmp_path, marked([execute])))
    assert (row["batch"], row["tokens"]) == (None, None)


def test_marker_numbers_are_ascii_digits() -> None:
    """``bs=٣٣`` (Arabic-Indic digits) is not 33: no SGLang marker."""
    from traceview.analyses.core.step_markers import MARKERS

    sglang = MARKERS[0].pattern
    assert sglang.fullmatch("step[DECODE bs=33]")
    assert not sglang.fullmatch("step[DECODE bs=٣٣]")


def test_nested_markers_count_a_kernel_in_the_innermost_step(tmp_path: Path) -> None:
    """``step[...]`` inside ``step[...]``: each kernel in one step, the innermost."""
    events = [x("user_annotation", "step[EXTEND bs=2 toks=8]", 0, 1000),
              *launched(10, 1),
              x("user_annotation", "step[DECODE bs=2]", 100, 300),
              *launched(110, 2), *launched(120, 3),
              *launched(600, 4)]  # fmt: skip
    rows = steps(write(tmp_path, events))
    assert [(r["name"], r["kernels"]) for r in rows] == [
        ("step[EXTEND bs=2 toks=8]", 2), ("step[DECODE bs=2]", 2)]  # fmt: skip
    assert sum(r["kernels"] for r in rows) == 4  # each kernel once


def test_steps_of_one_span_at_the_end_look_for_lost_launches_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trace's copies over one span (the same step three times, ending last): each is cut,
    and the launches are looked up once, not once a step (1,012 copies: 5 s)."""
    from traceview.analyses.core import step_markers

    looked: list[tuple[int, int]] = []
    lost = step_markers._lost_launches

    def spy(events: Any, found: Any, start: int, end: int) -> bool:
        looked.append((start, end))
        return lost(events, found, start, end)

    monkeypatch.setattr(step_markers, "_lost_launches", spy)
    events = marked(["step[DECODE bs=2]"])
    events += [x("user_annotation", "step[DECODE bs=2]", 0, 500)] * 2
    events.append(x("cuda_runtime", "cudaLaunchKernel", 100, 5, correlation=61))  # no kernel
    got = [s["degenerate"] for s in steps(write(tmp_path, events))]
    assert got == ["cut by the trace's end"] * 3
    assert len(looked) == 1
