"""Renderings of ``traceview summary``: one screen per trace."""

from __future__ import annotations

from traceview.analyses.core.breakdown import Breakdown
from traceview.analyses.core.names import display_names
from traceview.analyses.core.phase_figures import STEADY_TOLERANCE, PhaseReport
from traceview.analyses.memory import NO_EVENTS, MemoryReport
from traceview.analyses.ops.model_flops import Mfu
from traceview.analyses.summary import Overview
from traceview.render import units
from traceview.render.audit import trust_line
from traceview.render.document import Document, Lines, Section
from traceview.render.header import trace_lines
from traceview.render.memory import reserved_text
from traceview.render.ops import op_label
from traceview.render.tables import Table

_d = units.duration_ns  # a short name for the dense lines below


def _pct(part: int, whole: int) -> str:
    return units.pct(100.0 * part / whole if whole else 0.0)


FINDINGS_SHOWN = 6  # the Findings that open the screen; the rest are in the hints below


def finding_lines(o: Overview) -> list[str]:
    """The Findings: the hints ranked by the time at stake, one sentence each with a try
    line (docs/hints.md "Findings")."""
    findings = o.findings
    if not findings:
        return ["findings none: no hint fired (docs/hints.md lists the rules)"]
    lines = ["Findings (ranked by the GPU time at stake; the evidence in full under hint)"]
    for f in findings[:FINDINGS_SHOWN]:
        lines.append(f"{f.rank:>2}. {f.sentence}")
        lines.append(f"    try: {f.action}")
    if len(findings) > FINDINGS_SHOWN:
        lines.append(f"    {len(findings) - FINDINGS_SHOWN} more under hint below")
    return lines


def header_lines(o: Overview) -> list[str]:
    lines = trace_lines(o.trace)
    lines += finding_lines(o)
    lines += [_window_line(d) for d in o.devices]
    trust = None if o.trust is None else trust_line(o.trust)
    return lines + [f"note     {n}" for n in o.notes] + ([] if trust is None else [trust])


def _window_line(d: Breakdown) -> str:
    """``device 0: window = compute + exposed communication + exposed memcpy/memset + idle``;
    a term of a kind of work the device never ran (communication on one GPU) left out."""

    def term(name: str, ns: int) -> str:
        return f"{name} {_d(ns)} ({_pct(ns, d.window_ns)}%)"

    terms = [term("compute", d.compute_ns)]
    if d.communication_ns:
        terms.append(term("exposed communication", d.exposed_communication_ns))
    if d.copy_ns:
        terms.append(term("exposed memcpy/memset", d.exposed_copy_ns))
    idle = (
        f"idle {_d(d.idle_ns)} ({_pct(d.idle_ns, d.window_ns)}%: host wait "
        f"{_d(d.host_wait_ns)}, launch latency {_d(d.launch_latency_ns)})"
    )
    return f"device   {d.device}: window {_d(d.window_ns)} = {' + '.join(terms)} + {idle}"


def breakdown_table(d: Breakdown) -> Table:
    rows = [
        (c.category, _d(c.busy_ns), _pct(c.busy_ns, d.window_ns), _d(c.gpu_time_ns))
        for c in d.categories
    ]
    rows.append(("idle", _d(d.idle_ns), _pct(d.idle_ns, d.window_ns), "-"))
    return Table(("Category", "Busy", "% window", "GPU time"), (False, True, True, True), rows)


def top_tables(o: Overview) -> list[tuple[str, Table]]:
    """The top categories, kernels (short names) and operators by GPU time."""
    right = (False, True, True)
    headers = ("Name", "GPU time", "%")
    categories = [(c.name, _d(c.gpu_time_ns), units.pct(c.pct)) for c in o.categories]
    kernels = [(k.short_name or k.name, _d(k.gpu_time_ns), units.pct(k.pct)) for k in o.kernels]
    ops = [(op_label(op), _d(op.gpu_time_ns), units.pct(op.pct_gpu_time)) for op in o.ops]
    return [
        ("Top categories", Table(headers, right, categories)),
        ("Top kernels", Table(headers, right, kernels)),
        ("Top operators (the op that launched each kernel)", Table(headers, right, ops)),
    ]


def detail_lines(o: Overview) -> list[str]:
    launch = o.launches
    lines = []
    if launch.kernels:
        delay = "-" if launch.median_queue_delay_ns is None else _d(launch.median_queue_delay_ns)
        # Only kernels launched on their own are timed against their call: with graph
        # replays, say of how many kernels the share is.
        pct = _pct(launch.shorter_than_launch, launch.timed)
        shorter = f"{pct}% of kernels ran shorter than their launch call"
        if launch.graph_kernels:
            shorter = (
                f"of the {units.counted(launch.timed, 'kernel')} launched on their own, {pct}% "
                "ran shorter than their launch call"
            )
        if not launch.timed:
            shorter = "launch calls not recorded"
        cost = (
            f"; launch calls' CPU time median {_d(launch.median_call_ns)}, total "
            f"{_d(launch.call_total_ns)} ({units.counted(launch.calls, 'call')})"
            if launch.median_call_ns is not None
            else ""
        )
        lines.append(
            f"launch   {units.count(launch.linked)} of {units.counted(launch.kernels, 'kernel')} "
            f"linked to a launch; median queue delay (launch call → kernel start) {delay}"
            f"{cost}; {shorter}"
        )
    if launch.graph_launches:
        lines.append(
            f"graphs   {units.count(launch.graph_kernels)} of "
            f"{units.counted(launch.kernels, 'kernel')} "
            f"({_pct(launch.graph_kernel_ns, launch.kernel_ns)}% of kernel time) ran in "
            f"{units.counted(launch.graph_launches, 'CUDA-graph replay')}; the launch figures "
            "count each replay once, by its first kernel"
        )
    steps = o.steps
    if steps.count:
        median = "-" if steps.median_cpu_ns is None else _d(steps.median_cpu_ns)
        paced = steps.median_step_ns
        if paced is not None and steps.gpu_paced and _d(paced) != median:  # as shown
            median = f"{_d(paced)} (GPU-paced in {steps.gpu_paced} of {steps.count}; CPU {median})"
        parts = [
            f"device {d.device} busy {units.pct(d.median_busy_pct)}% of its step window, lag "
            f"{_d(d.median_lag_ns)}, behind the CPU in {d.behind} of {steps.count}"
            for d in steps.devices
        ]
        lines.append(
            f"steps    {units.counted(steps.count, 'step')}, median {median}; " + "; ".join(parts)
        )
    lines += mfu_lines(o.mfu)
    lines += phase_lines(o.phases)
    lines += memory_lines(o.memory)
    if not o.hints:
        lines.append("hints    none fired (docs/hints.md lists the rules)")
    for h in o.hints:
        lines.append(f"hint     {h.title}: {h.evidence}")
        lines.append(f"         try: {h.action} ({h.doc})")
    return lines


def mfu_lines(m: Mfu | None) -> list[str]:
    """One line: MFU with the peak it is of, the model FLOPs a step, tokens/s and the
    coverage, then the achieved TFLOP/s and where the tokens come from; or why MFU is not
    given (docs/metrics.md "Model FLOPs and MFU")."""
    if m is None or not m.steps:
        return []
    parts, more = [], []
    if m.flops_per_step is not None:
        parts.append(f"{m.flops_per_step / 1e12:,.2f} TFLOP a step")
        if m.tflops_per_s is not None:
            more.append(f"{m.tflops_per_s:,.1f} TFLOP/s achieved")
    if m.tokens_per_s is not None:
        parts.append(f"{m.tokens_per_s:,.0f} tokens/s")
        more.append(f"tokens from {m.tokens_source}")
    if m.coverage is not None and m.flops_per_step is not None:
        parts.append(f"coverage {units.pct(100 * m.coverage)}%")
    tail = ", ".join(parts) + (f"; {', '.join(more)}" if more else "")
    if m.value is None:
        return [f"mfu      not given: {m.why}" + (f"; {tail}" if tail else "")]
    return [
        f"mfu      MFU {units.pct(100 * m.value)}% ({m.dtype} peak {m.peak_tflops_per_s:,.1f} "
        f"TFLOP/s, {m.peak_source}), {tail}"
    ]


def phase_lines(phases: PhaseReport | None) -> list[str]:
    """Per known phase its step figures and top kernels (short names); the steady state."""
    if phases is None:
        return []
    lines = []
    for p in phases.phases:
        busy = "-" if p.median_busy_pct is None else f"{units.pct(p.median_busy_pct)}%"
        short = display_names([k.name for k in p.top_kernels])
        top = ", ".join(f"{short.get(k.name, k.name)} {units.pct(k.pct)}%" for k in p.top_kernels)
        lines.append(
            f"phase    {p.phase}: {units.counted(p.steps, 'step')}, median {_d(p.median_step_ns)}"
            f", GPU busy {busy}, host wait {_d(p.median_host_wait_ns)}, "
            f"{units.pct(p.graph_kernel_pct)}% of kernel time in CUDA-graph replays; "
            f"top kernels: {top or '-'}"
        )
    st = phases.steady
    if st is not None:
        tokens = "" if st.tokens_per_s is None else f", {st.tokens_per_s:,.0f} tokens/s"
        lines.append(
            f"steady   {st.phase} steps {st.first_step}-{st.last_step} ({st.steps} steps in "
            f"{_d(st.duration_ns)}, each within {STEADY_TOLERANCE:.0%} of the phase's median): "
            f"{st.steps_per_s:,.2f} steps/s{tokens}"
        )
    return lines


def memory_lines(memory: MemoryReport | None) -> list[str]:
    """One line per device (and the host): its peak allocated and reserved, with the % of
    the device's memory when the trace gives it; a line saying how to record none."""
    if memory is None:
        return []
    if memory.events == 0:
        return [f"memory   {NO_EVENTS}"]
    lines = []
    for d in memory.devices:
        pct = d.peak_reserved_pct
        share = (
            ""
            if pct is None
            else f" ({units.pct(pct)}% of {units.memory(d.total_memory_bytes or 0)})"
        )
        lines.append(
            f"memory   device {d.device}: peak {units.memory(d.peak_allocated_bytes)} allocated, "
            f"{reserved_text(d, d.peak_reserved_bytes)} reserved{share}"
        )
    if memory.cpu is not None:
        lines.append(
            f"memory   host: peak {units.memory(memory.cpu.peak_allocated_bytes)} allocated"
        )
    return lines


def _sections(o: Overview) -> list[tuple[str, Table]]:
    out = [(f"Device {d.device}: busy time by category", breakdown_table(d)) for d in o.devices]
    return [*out, *top_tables(o)]


def document(o: Overview) -> Document:
    """``traceview summary`` in every format (no CSV: it is several tables of unlike rows)."""
    sections = [Section(body, title) for title, body in _sections(o)]
    return Document(
        head=header_lines(o),
        sections=[*sections, Section(Lines(detail_lines(o)))],
        data=o.as_json,
        csv=None,
    )
