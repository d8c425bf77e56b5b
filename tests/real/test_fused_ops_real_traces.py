"""Fused ops on real traces: every Inductor kernel name of ../shared/traces read back whole,
and ``kernels --group-by fused-op`` against a plain computation on the raw events (the
reference's op links, a fused kernel shared equally among the ops its name says it fused)."""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from pathlib import Path

import pytest
import reference
from conftest import SHARED_TRACES

from traceview.analyses.core.fused import KNOWN_OPS, TRITON_KERNEL, fused_ops
from traceview.analyses.kernels import KernelOptions, analyse_kernels
from traceview.app.reading import read_trace
from traceview.options import ReadOptions

COMPILED = [
    SHARED_TRACES / "h200" / "compiled2.json.gz",
    SHARED_TRACES / "h200" / "eager.json.gz",
    SHARED_TRACES / "tracelens__torch_compile_triton__trace.json.gz",
    SHARED_TRACES / "hta__triton_example__triton_example.json.gz",
]
needs_traces = pytest.mark.skipif(not SHARED_TRACES.is_dir(), reason="../shared/traces is absent")


def _kernel_names() -> set[str]:
    names: set[str] = set()
    for path in SHARED_TRACES.rglob("*.json.gz"):
        text = gzip.decompress(path.read_bytes()).decode("utf-8", "replace")
        names |= set(re.findall(r'"(triton_[a-z]+_fused[A-Za-z0-9_]*)"', text))
    return names


@needs_traces
def test_every_inductor_name_reads_back_whole() -> None:
    """Joined again, the ops give the name (an op seen twice aside): no token is lost, and
    no op is a fragment of an aten name that the vocabulary missed."""
    names = {n for n in _kernel_names() if TRITON_KERNEL.match(n)}
    assert len(names) >= 30  # compiled2, the TraceLens and HTA Triton traces
    for name in names:
        ops = fused_ops(name)
        body = re.sub(r"_?\d+$", "", name.split("_fused", 1)[1]).removeprefix("_")
        assert ops is not None and bool(ops) == bool(body), name
        assert "_".join(ops) == body or len(set(body.split("_"))) < len(body.split("_")), name
        assert not set(ops) & FRAGMENTS, (name, ops)
        assert all(op in KNOWN_OPS or "_" not in op.strip("_") for op in ops)


# tokens of aten names that are no op by themselves
FRAGMENTS = {"backward", "native", "layer", "norm", "_to", "_unsafe", "indices", "with", "data",
             "legit", "like", "nd", "scatter_", "element", "type", "seed"}  # fmt: skip


def _reference_shares(path: Path) -> dict[str, tuple[int, int]]:
    """Per op: (kernels sharing it, summed share in ns)."""
    _, events = reference.load_trace(path)
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for kernel, leaf in reference.fusion_leaves(events):
        dur = reference.dur_ns(kernel)
        ops = fused_ops(reference.event_name(kernel)) or (
            "(no op)" if leaf is None else reference.fused_op_label(leaf),
        )
        for i, op in enumerate(ops):
            out[op][0] += 1
            out[op][1] += dur // len(ops) + (1 if i < dur % len(ops) else 0)
    return {op: (c, t) for op, (c, t) in out.items()}


@needs_traces
@pytest.mark.parametrize("path", COMPILED, ids=[p.name.split(".")[0] for p in COMPILED])
def test_fused_op_table_against_the_reference(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path.name} is absent")
    events = read_trace(path, ReadOptions(quiet=True, cache=False), keep_cpu=True)
    report = analyse_kernels(events, KernelOptions(group_by="fused-op", top=0))
    assert {r.name: (r.count, r.total_ns) for r in report.rows} == _reference_shares(path)
    whole = analyse_kernels(events, KernelOptions(top=0))
    assert report.total_ns == whole.total_ns and report.count == whole.count


@needs_traces
def test_eager_and_compiled_meet_by_op() -> None:
    """The layer norm and dropout ops, eager kernels on one side and inside fused Triton
    kernels on the other, are rows of the same name on both."""
    rows = {}
    for name in ("eager", "compiled2"):
        events = read_trace(
            SHARED_TRACES / "h200" / f"{name}.json.gz",
            ReadOptions(quiet=True, cache=False),
            keep_cpu=True,
        )
        report = analyse_kernels(events, KernelOptions(group_by="fused-op", top=0))
        rows[name] = {r.name for r in report.rows}
    for op in ("native_layer_norm", "native_layer_norm_backward", "native_dropout", "mm"):
        assert op in rows["eager"] and op in rows["compiled2"], op
    assert "(no op)" not in rows["eager"] | rows["compiled2"]


@needs_traces
def test_kernel_rows_show_what_triton_kernels_fused() -> None:
    from typer.testing import CliRunner

    from traceview.cli import app

    path = SHARED_TRACES / "h200" / "compiled2.json.gz"
    r = CliRunner().invoke(app, ["kernels", str(path), "-f", "json", "--top", "0", "--no-cache"])
    assert r.exit_code == 0, r.output
    rows = {k["name"]: k["fused_ops"] for k in json.loads(r.stdout)["kernels"]}
    assert rows["triton_poi_fused_native_dropout_relu_threshold_backward_view_11"] == [
        "native_dropout",
        "relu",
        "threshold_backward",
        "view",
    ]
    assert all(v is None for n, v in rows.items() if not n.startswith("triton_"))
