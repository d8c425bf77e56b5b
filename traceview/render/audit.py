"""Renderings of ``traceview audit``: the verdicts, the checks that found something, examples."""

from __future__ import annotations

from collections.abc import Mapping

from traceview.analyses.audit import EXACT, FIGURE_WORDS, Audit, Check, Example, Figure
from traceview.analyses.core.names import display_names
from traceview.render import units
from traceview.render.document import Document, Lines, Section
from traceview.render.header import trace_lines
from traceview.render.tables import Table, to_csv

_CSV_FIELDS = ("id", "severity", "count", "time_us", "steps", "what")


def verdict_line(a: Audit) -> str:
    """The one line that answers the question."""
    untrusted = [FIGURE_WORDS[n] for n, f in a.figures.items() if f.trust == "untrusted"]
    if untrusted:
        return f"verdict  UNTRUSTED: {', '.join(untrusted)} (exit 1)"
    approximate = [FIGURE_WORDS[n] for n, f in a.figures.items() if f.trust == "approximate"]
    if approximate:
        return f"verdict  sound; approximate: {', '.join(approximate)}"
    return "verdict  sound: every headline figure is exact"


def trust_line(figures: Mapping[str, Figure]) -> str | None:
    """summary's one line when a figure is not exact (None when all are): the figures of each
    verdict and reason together."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for n, f in figures.items():
        if f.trust != EXACT:
            grouped.setdefault((f.trust, f.reason), []).append(FIGURE_WORDS.get(n, n))
    if not grouped:
        return None
    words = [
        f"{trust}: {', '.join(names)}" + (f" ({reason})" if reason else "")
        for (trust, reason), names in grouped.items()
    ]
    return "trust    " + "; ".join(words) + "; traceview audit says why"


def trust_difference(base: Mapping[str, Figure], new: Mapping[str, Figure]) -> str | None:
    """diff's warning when a headline figure's verdict differs between the two sides."""
    changed = [
        f"{FIGURE_WORDS.get(n, n)} {base[n].trust} in the base, {new[n].trust} in the new"
        for n in base
        if n in new and base[n].trust != new[n].trust
    ]
    if not changed:
        return None
    return (
        "the two sides' trust differs (compare with care; traceview audit on each says why): "
        + "; ".join(changed)
    )


def _steps(steps: tuple[int, ...]) -> str:
    from traceview.analyses.core.steps import compress

    return compress(list(steps)) if steps else "-"


def checks_table(a: Audit) -> Table:
    rows = [
        (c.id, c.severity, units.count(c.count), units.duration_ns(c.time_ns), _steps(c.steps))
        for c in a.found
    ]
    return Table(
        ("Check", "Severity", "Count", "Time", "Steps"), (False, False, True, True, False), rows
    )


def figures_table(a: Audit) -> Table:
    rows = [
        (
            FIGURE_WORDS[n],
            f.trust,
            "-"
            if f.bound_ns is None or f.trust != "approximate"
            else f"± {units.duration_ns(f.bound_ns)}",
            f.reason or "-",
        )
        for n, f in a.figures.items()
    ]
    return Table(("Figure", "Trust", "Bound", "Why"), (False, False, True, False), rows)


def _example(e: Example, short: Mapping[str, str]) -> str:
    where = "" if e.ts_ns is None else f"@{e.ts_ns / 1000:.3f} "
    parts = [e.name if e.ts_ns is None else short.get(e.name, e.name)]  # a line kineto wrote
    if e.device is not None:
        parts.append(f"device {e.device}" + ("" if e.stream is None else f" stream {e.stream}"))
    if e.correlation is not None:
        parts.append(f"correlation {e.correlation}")
    if e.step is not None:
        parts.append(f"step {e.step}")
    if e.ts_ns is not None and e.dur_ns:
        parts.append(units.duration_ns(e.dur_ns))
    if e.detail:
        parts.append(e.detail)
    return f"  {where}{', '.join(parts)}"


def detail_lines(c: Check) -> list[str]:
    """A found check: what it counts, its parts and devices, its examples."""
    lines = [f"{c.id} ({c.severity}): {units.counted(c.count, 'finding')}; {c.what}"]
    shares = [f"{units.count(p.count)} {p.what}" for p in c.parts if p.count]
    if shares:
        lines.append("  " + "; ".join(shares))
    if len(c.devices) > 1:
        lines.append("  " + "; ".join(f"device {d}: {units.count(n)}" for d, n, _ in c.devices))
    short = display_names([e.name for e in c.examples if e.ts_ns is not None])
    lines += [_example(e, short) for e in c.examples]
    return lines


def document(a: Audit) -> Document:
    """``traceview audit`` in every format; the CSV is one row per check (all, 0s too)."""
    head = [*trace_lines(a.trace), verdict_line(a), *(f"note     {n}" for n in a.notes)]
    sections = [Section(figures_table(a), "Headline figures")]
    if a.found:
        sections.append(Section(checks_table(a), "Findings"))
        details = [line for c in a.found for line in detail_lines(c)]
        sections.append(Section(Lines(details), "Examples (trim --window takes the @ts)"))
    passed = len(a.checks) - len(a.found)
    foot = [f"{units.counted(passed, 'check')} found nothing (docs/audit.md defines each)"]
    return Document(
        head=head,
        sections=sections,
        data=a.as_json,
        csv=lambda: to_csv(
            _CSV_FIELDS,
            (
                (c.id, c.severity, c.count, c.time_ns / 1000, " ".join(map(str, c.steps)), c.what)
                for c in a.checks
            ),
        ),
        foot=foot,
        foot_style="red" if a.untrusted else "green",
    )
