"""Hostile names (rich markup, control bytes, bidi, formulas, Markdown) and a trace full of them."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

# name -> how it must be shown in terminal/text output (control characters as escapes).
SHOWN: dict[str, str] = {
    "[/x]": "[/x]",
    "load batch [/data/train]": "load batch [/data/train]",
    "[bold]bold[/bold] [italic]": "[bold]bold[/bold] [italic]",
    "[link=file:///etc/passwd]link[/link]": "[link=file:///etc/passwd]link[/link]",
    "[conceal]hidden[/conceal]": "[conceal]hidden[/conceal]",
    "void kernel<T>(T*) [with T = float]": "void kernel<T>(T*) [with T = float]",
    "triton_kernel[grid](x)": "triton_kernel[grid](x)",
    "emoji :ok: :smile:": "emoji :ok: :smile:",
    "esc \x1b]0;title\x07 \x1b[2J \x1b[31mred": r"esc \x1b]0;title\x07 \x1b[2J \x1b[31mred",
    "ctl bs\x08 nul\x00 cr\r del\x7f c1\x85\x9b": r"ctl bs\x08 nul\x00 cr\r del\x7f c1\x85\x9b",
    "bidi \u202egnp.exe\u202c \u2066iso\u2069 \u200elrm\u200f zw\u200b bom\ufeff ls\u2028":
        r"bidi \u202egnp.exe\u202c \u2066iso\u2069 \u200elrm\u200f zw\u200b bom\ufeff ls\u2028",
    "=HYPERLINK(1)": "=HYPERLINK(1)",
    "+1+2": "+1+2",
    "-3": "-3",
    "@SUM(A1)": "@SUM(A1)",
    "\ttab first": r"\ttab first",
    "md | pipe <script>x</script> `tick` *star* __dunder__ &amp; new\nline":
        r"md | pipe <script>x</script> `tick` *star* __dunder__ &amp; new\nline",
}  # fmt: skip
NAMES = tuple(SHOWN)
DEVICE = "GPU \x1b[2J [bold]A100[/bold] | <b>"
DEVICE_SHOWN = r"GPU \x1b[2J [bold]A100[/bold] | <b>"
# How the Markdown outputs show some of the names (escaped for GitHub-flavoured Markdown).
MARKDOWN: dict[str, str] = {
    "[link=file:///etc/passwd]link[/link]": r"\[link=file:///etc/passwd\]link\[/link\]",
    "void kernel<T>(T*) [with T = float]": r"void kernel&lt;T&gt;(T\*) \[with T = float\]",
    "esc \x1b]0;title\x07 \x1b[2J \x1b[31mred": r"esc \\x1b\]0;title\\x07 \\x1b\[2J \\x1b\[31mred",
    "md | pipe <script>x</script> `tick` *star* __dunder__ &amp; new\nline":
        r"md \| pipe &lt;script&gt;x&lt;/script&gt; \`tick\` \*star\* \_\_dunder\_\_ "
        r"&amp;amp; new\\nline",
}  # fmt: skip
# Shown by rich when markup or emoji codes are read: none of these may appear.
RICH_MISREADINGS = ("🆗", "😄", "\x1b]8;", "\x1b[8m", "\x1b[3m")
_UNSAFE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def unsafe_characters(text: str) -> set[str]:
    """Control and format characters in ``text`` other than the newline."""
    return {c for c in text if c != "\n" and unicodedata.category(c) in _UNSAFE}


def hostile_trace(path: Path, slow: float = 1.0, device: str = DEVICE) -> Path:
    """One step; kernel k (a hostile name) ends in a gap during which the thread launching
    kernel k+1 is in the runtime call ``rt <name>`` inside ``op <name>`` (even k) or the
    annotation ``ann <name>`` (odd k), so the largest gaps' CPU context quotes them.
    ``slow`` scales the kernels' durations; ``device`` is the GPU's name."""
    span = 1000 * (len(NAMES) + 2)
    events: list[dict[str, object]] = [_x("user_annotation", "ProfilerStep#1", 0, span)]
    for k, name in enumerate(NAMES):
        t = 1000 * (k + 1)
        events += [
            _x("user_annotation", f"ann {name}", t, 900),
            *([_x("cpu_op", f"op {name}", t + 10, 800)] if k % 2 == 0 else []),
            _x("cuda_runtime", f"rt {name}", t + 20, 480),
            _x("cuda_runtime", "cudaLaunchKernel", t + 600, 5, correlation=k + 1),
            _x("kernel", name, t + 610, round(440 * slow), pid=0, tid=7, device=0, stream=7,
               correlation=k + 1),
        ]  # fmt: skip
    doc = {"deviceProperties": [{"id": 0, "name": device}], "traceEvents": events}
    path.write_text(json.dumps(doc))
    return path


def _x(cat: str, name: str, ts: int, dur: int, pid: int = 9, tid: int = 1, **args: int) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": args}  # fmt: skip
