"""Before/after comparison of traceview's JSON outputs on every real trace (issue #14).

    python benchmarks/compare_outputs.py --before DIR_A --after DIR_B
        [--traces ../shared/traces] [--out report.md] [--jobs 1] [--timeout 900]

DIR_A and DIR_B are checkouts of traceview, each with its own ``.venv`` (``make install``);
each side runs its own ``.venv/bin/traceview`` (else ``.venv/bin/python -m traceview``) as a
subprocess. Nothing is imported from traceview: the commands and options of each side are found
in its ``--help``, and only those present on both sides are run (the report lists the rest).

Every case (a command, its options and its inputs) runs twice per side in a fresh, empty
``TRACEVIEW_CACHE_DIR`` of that side: cold (reads the trace, fills the cache), then warm (from
the cache). Before-cold is compared with after-cold; cold with warm on each side. Outputs
compared: stdout of ``-f json``; the file of ``snapshot -o``; for ``export``, meta.json and
every Parquet table (schema and values, dumped by the side's own pyarrow). A failing command
is compared by its exit code and its last stderr line. JSON is walked: keys on one side only
and leaf values that differ (numbers exactly, int vs float too) are reported by path, list
indices collapsed to ``[]``. Fields that depend on the build or the run are ignored (IGNORED,
listed at the top of the report); temporary paths and the checkout paths are normalised.

The report is Markdown (stdout, or --out); the exit status is 0 whatever it finds.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# Keys never compared, at any depth except under a trace's own "header" (that is trace data).
IGNORED = {
    "traceview_version": "the package version string",
    "ingest_code": "fingerprint of the reading code (differs by construction between checkouts)",
    "cache_schema": "cache format number (export's meta.json)",
    "generated_at": "timestamp",
    "created_at": "timestamp",
    "timestamp": "timestamp",
    "elapsed_s": "timing",
    "wall_s": "timing",
    "cache_dir": "cache path",
    "cache_path": "cache path",
}
# (command, option, value or None, the value is one of the option's choices): run besides the
# plain command when both sides have the option (and, for a choice, name the value in its help).
VARIANTS = [
    ("kernels", "--group-by", "short", True),
    ("kernels", "--group-by", "category", True),
    ("gaps", "--per-stream", None, False),
    ("gaps", "--hist-min", "1", False),
    ("ops", "--group-by", "op+shapes", True),
    ("ops", "--level", "top", True),
]
PAIR_VARIANTS = [("diff", "--group-by", "short", True), ("diff", "--group-by", "category", True)]
RUN_VARIANTS = ["--per-rank"]
DLRM = "param__dlrm_8rank_worker*.json.gz"
EXAMPLES = 3
ABSENT = "(absent)"
DUMP_PARQUET = """
import json, sys, pathlib
import pyarrow.parquet as pq
def cell(v):
    return v.hex() if isinstance(v, bytes) else v
out = {}
for f in sorted(pathlib.Path(sys.argv[1]).iterdir()):
    if f.suffix == ".json":
        out[f.name] = json.loads(f.read_text())
    elif f.suffix == ".parquet":
        t = pq.read_table(f)
        out[f.name] = {"schema": [f"{x.name}: {x.type}" for x in t.schema], "rows": t.num_rows,
                       "columns": {n: [cell(v) for v in t.column(n).to_pylist()]
                                   for n in t.column_names}}
    else:
        out[f.name] = "(other file)"
json.dump(out, sys.stdout)
"""


@dataclass
class CommandHelp:
    """What one side's ``traceview CMD --help`` says: options (name -> its help line)."""

    options: dict[str, str]
    required: set[str]
    arguments: str
    variadic: bool

    def has(self, option: str, value: str | None = None) -> bool:
        line = self.options.get(option)
        if line is None or value is None:
            return line is not None
        return re.search(rf"(?<![\w+-]){re.escape(value)}(?![\w+-])", line) is not None

    def json_format(self) -> bool:
        return self.has("--format", "json")

    def takes_sqlite(self) -> bool:
        args = self.arguments.lower()
        return "sqlite" in args or ".json" not in args


@dataclass
class Side:
    name: str
    root: Path
    exe: list[str]
    commands: dict[str, CommandHelp] = field(default_factory=dict)
    commit: str = "?"


@dataclass(frozen=True)
class Case:
    label: str  # the report's section: command and options
    trace: str  # the report's row: the input(s)
    argv: tuple[str, ...]  # after the executable; "{out}" is an output path
    output: str  # stdout | file | export


@dataclass
class Run:
    code: int
    stderr: str
    doc: Any = None
    problem: str | None = None


@dataclass
class Finding:
    kind: str
    path: str
    before: Any = None
    after: Any = None


@dataclass
class Tally:
    """Per section and comparison: the traces seen, those that differ, findings by path."""

    traces: int = 0
    differ: list[str] = field(default_factory=list)
    paths: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    def add(self, trace: str, findings: list[Finding]) -> None:
        self.traces += 1
        if findings:
            self.differ.append(trace)
        for f in findings:
            slot = self.paths.setdefault((f.kind, f.path), {"traces": set(), "n": 0, "ex": []})
            slot["traces"].add(trace)
            slot["n"] += 1
            if len(slot["ex"]) < EXAMPLES and trace not in [e[0] for e in slot["ex"]]:
                slot["ex"].append((trace, f.before, f.after))


# ---- discovering each side ----


def help_text(side: Side, *args: str) -> str:
    env = clean_env() | {"COLUMNS": "1000", "NO_COLOR": "1", "TERM": "dumb"}
    r = subprocess.run(
        [*side.exe, *args, "--help"], capture_output=True, text=True, env=env, timeout=120
    )
    return r.stdout


def parse_commands(text: str) -> list[str]:
    names, inside = [], False
    for line in text.splitlines():
        if line.startswith("╭") and "Commands" in line:
            inside = True
        elif line.startswith("╰"):
            inside = False
        elif inside and (m := re.match(r"│ (\w[\w-]*)\s", line)):
            names.append(m.group(1))
    return names


def parse_command(text: str) -> CommandHelp:
    options: dict[str, str] = {}
    required: set[str] = set()
    arguments: list[str] = []
    for line in text.splitlines():
        if m := re.match(r"│\s+(\*?)\s*(--[\w-]+(?:,--[\w-]+)*)", line):
            for name in m.group(2).split(","):
                options[name] = line
                if m.group(1):
                    required.add(name)
        elif re.match(r"│\s+\*?\s+[a-z_]+\s+<", line):
            arguments.append(line)
    variadic = re.search(r"Usage: .*[{\[]\w+[}\]]\.\.\.", text) is not None
    return CommandHelp(options, required, "\n".join(arguments), variadic)


def discover(name: str, root: Path) -> Side:
    exe_path = root / ".venv" / "bin" / "traceview"
    exe = (
        [str(exe_path)]
        if exe_path.exists()
        else [str(root / ".venv/bin/python"), "-m", "traceview"]
    )
    side = Side(name, root, exe)
    for command in parse_commands(help_text(side)):
        side.commands[command] = parse_command(help_text(side, command))
    git = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    side.commit = git.stdout.strip() or "?"
    return side


# ---- planning the cases ----


def trace_files(traces: Path, tmp: Path) -> tuple[list[Path], list[Path]]:
    """The Chrome traces, and the nsys exports (a .sqlite.gz unpacked into tmp)."""
    chrome = sorted({*traces.glob("*.json.gz"), *traces.glob("*.json")})
    nsys: list[Path] = []
    for p in sorted({*traces.rglob("*.sqlite"), *traces.rglob("*.sqlite.gz")}):
        if p.name.endswith(".gz"):
            plain = tmp / "nsys" / p.name.removesuffix(".gz")
            plain.parent.mkdir(parents=True, exist_ok=True)
            with gzip.open(p, "rb") as src, plain.open("wb") as dst:
                shutil.copyfileobj(src, dst)
            p = plain
        nsys.append(p)
    return chrome, nsys


def on_both(
    before: Side, after: Side, command: str, option: str | None = None, value: str | None = None
) -> bool:
    if command not in before.commands or command not in after.commands:
        return False
    if option is None:
        return True
    return before.commands[command].has(option, value) and after.commands[command].has(
        option, value
    )


def form(command: str, helps: CommandHelp) -> tuple[list[str], str] | None:
    """How a command gives JSON: extra argv and the output mode; None if it does not."""
    if command == "snapshot":
        return ["-o", "{out}"], "file"
    if command == "export":
        return ["-o", "{out}"], "export"
    if helps.json_format():
        return ["-f", "json"], "stdout"
    return None


def plan(
    before: Side, after: Side, chrome: list[Path], nsys: list[Path], run_dir: Path | None
) -> tuple[list[Case], list[str]]:
    cases: list[Case] = []
    skipped: list[str] = []
    for side, other in ((before, after), (after, before)):
        for c in side.commands:
            if c not in other.commands:
                skipped.append(f"`{c}`: only on the {side.name} side")
    for command in before.commands:
        if command not in after.commands:
            continue
        b, a = before.commands[command], after.commands[command]
        why = unrunnable(command, b, a)
        if why:
            skipped.append(f"`{command}`: {why}")
            continue
        extra, mode = form(command, a) or ([], "stdout")
        variants: list[list[str]] = [[]]
        for cmd, option, value, choice in VARIANTS:
            if cmd != command:
                continue
            if on_both(before, after, cmd, option, value if choice else None):
                variants.append([option] + ([value] if value else []))
            else:
                shown = f"{cmd} {option} {value}" if value else f"{cmd} {option}"
                skipped.append(f"`{shown}`: not on both sides")
        for variant in variants:
            label = " ".join([command, *variant])
            for t in chrome + [p for p in nsys if b.takes_sqlite() and a.takes_sqlite()]:
                inputs = [str(t), str(t)] if command == "diff" else [str(t)]
                cases.append(Case(label, t.name, (command, *inputs, *variant, *extra, "-q"), mode))
        if command == "diff":
            cases += pair_cases(before, after, chrome, extra, skipped)
        cases += run_cases(before, after, command, run_dir, extra, mode, skipped)
    return cases, skipped


def unrunnable(command: str, b: CommandHelp, a: CommandHelp) -> str | None:
    if not b.arguments or not a.arguments:
        return "takes no trace (not an analysis of one)"
    if form(command, b) is None or form(command, a) is None:
        return "no JSON output on one side or both"
    need = (b.required | a.required) - {"--output"}
    if need:
        return f"needs {', '.join(sorted(need))} (an input this comparison does not have)"
    return None


def pair_cases(
    before: Side, after: Side, chrome: list[Path], extra: list[str], skipped: list[str]
) -> list[Case]:
    ranks = sorted(p for p in chrome if p.match(DLRM))
    if len(ranks) < 2:
        skipped.append("`diff` worker0 vs worker1: the DLRM rank traces are not in the traces dir")
        return []
    variants: list[list[str]] = [[]]
    for c, o, v, _ in PAIR_VARIANTS:
        if on_both(before, after, c, o, v):
            variants.append([o, v])
        else:
            skipped.append(f"`{c} {o} {v}` (worker0 vs worker1): not on both sides")
    out = []
    for variant in variants:
        label = " ".join(["diff", *variant, "(worker0 vs worker1)"])
        argv = ("diff", str(ranks[0]), str(ranks[1]), *variant, *extra, "-q")
        out.append(Case(label, f"{ranks[0].name} vs {ranks[1].name}", argv, "stdout"))
    return out


def run_cases(
    before: Side,
    after: Side,
    command: str,
    run_dir: Path | None,
    extra: list[str],
    mode: str,
    skipped: list[str],
) -> list[Case]:
    """Run-level cases on the 8-rank DLRM set: only when both sides take a run for the command."""
    if run_dir is None:
        return []
    b, a = before.commands[command], after.commands[command]
    both_runs = "ranks" in before.commands and "ranks" in after.commands
    if not (b.variadic and a.variadic) and not (command in ("snapshot", "diff") and both_runs):
        who = [
            s.name
            for s, h in ((before, b), (after, a))
            if not h.variadic and not (command in ("snapshot", "diff") and "ranks" in s.commands)
        ]
        whom = "either side" if len(who) == 2 else f"the {who[0]} side"
        skipped.append(f"`{command}` of a run (the DLRM ranks): not taken by {whom}")
        return []
    inputs = [str(run_dir)] * (2 if command == "diff" else 1)
    out = []
    for variant in [[], *([v] for v in RUN_VARIANTS if b.has(v) and a.has(v))]:
        label = " ".join([command, *variant, "(run: 8 DLRM ranks)"])
        out.append(
            Case(
                label,
                "param__dlrm_8rank_worker0..7",
                (command, *inputs, *variant, *extra, "-q"),
                mode,
            )
        )
    return out


def make_run_dir(chrome: list[Path], tmp: Path) -> Path | None:
    ranks = sorted(p for p in chrome if p.match(DLRM))
    if len(ranks) < 2:
        return None
    run = tmp / "dlrm_run"
    run.mkdir()
    for p in ranks:
        (run / p.name).symlink_to(p)
    return run


# ---- running ----


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("TRACEVIEW_")}


def run_once(side: Side, case: Case, cache: Path, out: Path, timeout: float) -> Run:
    argv = [str(out) if a == "{out}" else a for a in case.argv]
    env = clean_env() | {"TRACEVIEW_CACHE_DIR": str(cache), "COLUMNS": "120", "NO_COLOR": "1"}
    try:
        r = subprocess.run(
            [*side.exe, *argv], capture_output=True, text=True, env=env, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return Run(-1, "", problem=f"timed out after {timeout:.0f} s")
    run = Run(r.returncode, r.stderr)
    try:
        run.doc = read_output(side, case, r.stdout, out)
    except (ValueError, OSError, subprocess.SubprocessError) as e:
        run.problem = f"{type(e).__name__}: {str(e)[:200]}"
    return run


def read_output(side: Side, case: Case, stdout: str, out: Path) -> Any:
    if case.output == "stdout":
        return json.loads(stdout) if stdout.strip() else None
    if case.output == "file":
        return json.loads(out.read_text()) if out.exists() else None
    if not out.exists():
        return None
    python = side.root / ".venv" / "bin" / "python"
    dump = subprocess.run(
        [str(python), "-c", DUMP_PARQUET, str(out)], capture_output=True, text=True, check=True
    )
    return json.loads(dump.stdout)


def run_side(side: Side, case: Case, work: Path, timeout: float) -> tuple[Run, Run]:
    """Cold then warm in a fresh cache dir of this side; the dir is removed after."""
    work.mkdir(parents=True)
    cold = run_once(side, case, work / "cache", work / "out-cold", timeout)
    warm = run_once(side, case, work / "cache", work / "out-warm", timeout)
    shutil.rmtree(work, ignore_errors=True)
    return cold, warm


# ---- comparing ----


class Normaliser:
    """Strings with a temporary or checkout path are compared with that path replaced."""

    def __init__(self, tmp: Path, sides: list[Side]) -> None:
        self.subs = [(str(tmp), "<tmp>")] + [(str(s.root), "<checkout>") for s in sides]
        self.ignored: set[str] = set()

    def text(self, s: str) -> str:
        for old, new in self.subs:
            s = s.replace(old, new)
        return re.sub(r"<tmp>/work/(before|after)/\d+/(cache|out-cold|out-warm)", r"<\2>", s)


def compare(a: Run, b: Run, norm: Normaliser) -> list[Finding]:
    found: list[Finding] = []
    if a.code != b.code:
        found.append(
            Finding(
                "exit code",
                "(exit code)",
                f"{a.code}: {last_line(a, norm)}",
                f"{b.code}: {last_line(b, norm)}",
            )
        )
    for run, kind in ((a, "problem before"), (b, "problem after")):
        if run.problem:
            found.append(Finding(kind, "(output)", run.problem, None))
    if a.doc is None and b.doc is None:
        if a.code == b.code and a.code != 0 and last_line(a, norm) != last_line(b, norm):
            found.append(
                Finding("error message", "(stderr)", last_line(a, norm), last_line(b, norm))
            )
        return found
    if (a.doc is None) != (b.doc is None):
        found.append(
            Finding(
                "output",
                "(json)",
                "none" if a.doc is None else "json",
                "none" if b.doc is None else "json",
            )
        )
        return found
    found.extend(walk(a.doc, b.doc, "", norm))
    return found


def last_line(run: Run, norm: Normaliser) -> str:
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    return norm.text(lines[-1]) if lines else ""


def walk(a: Any, b: Any, path: str, norm: Normaliser) -> Iterator[Finding]:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in a.keys() | b.keys():
            sub = f"{path}.{k}" if path else k
            if k in IGNORED and "header" not in sub.split(".")[:-1]:
                norm.ignored.add(sub)
            elif k not in b:
                yield Finding("key only before", sub, short(a[k]), ABSENT)
            elif k not in a:
                yield Finding("key only after", sub, ABSENT, short(b[k]))
            else:
                yield from walk(a[k], b[k], sub, norm)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            yield Finding("list length", path + "[]", len(a), len(b))
        for x, y in zip(a, b, strict=False):
            yield from walk(x, y, path + "[]", norm)
    elif not same_leaf(a, b, norm):
        kind = (
            "value (null before)" if a is None else "value (null after)" if b is None else "value"
        )
        yield Finding(kind, path, short(a), short(b))


def same_leaf(a: Any, b: Any, norm: Normaliser) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, str):
        return norm.text(a) == norm.text(b)
    return bool(a == b) or (isinstance(a, float) and a != a and b != b)


def short(v: Any) -> str:
    s = json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else repr(v)
    return s if len(s) <= 70 else s[:67] + "..."


# ---- the report ----


def md(s: Any) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ").replace("`", "'")


def report(
    sides: list[Side],
    traces: Path,
    n_traces: int,
    skipped: list[str],
    tallies: dict[str, dict[str, Tally]],
    norm: Normaliser,
) -> str:
    before, after = sides
    out = [
        "# traceview outputs, before vs after",
        "",
        f"- before: `{before.root}` at `{before.commit}`",
        f"- after: `{after.root}` at `{after.commit}`",
        f"- traces: `{traces}` ({n_traces} input files); each case run cold then warm,"
        " each side in its own empty cache dir",
        f"- command: `python benchmarks/compare_outputs.py --before {before.root}"
        f" --after {after.root} --traces {traces}`",
        "",
        "Ignored (build- or run-dependent) keys, at any depth but inside a trace's own `header`: "
        + ", ".join(f"`{k}` ({why})" for k, why in IGNORED.items())
        + ". Paths where they occurred: "
        + (", ".join(f"`{p}`" for p in sorted(norm.ignored)) or "none")
        + ". Strings are compared with the temporary dir and the checkout dirs replaced"
        " by `<tmp>` / `<checkout>`.",
        "",
        "Skipped: " + ("; ".join(skipped) if skipped else "nothing") + ".",
        "",
        "| command | cases | identical | differ | after cold≠warm | before cold≠warm |",
        "|---|---|---|---|---|---|",
    ]
    for label, t in tallies.items():
        ba = t["before→after"]
        out.append(
            f"| `{md(label)}` | {ba.traces} | {ba.traces - len(ba.differ)} | {len(ba.differ)} "
            f"| {len(t['after cold→warm'].differ)} | {len(t['before cold→warm'].differ)} |"
        )
    for label, t in tallies.items():
        out += ["", f"## `{md(label)}`", ""]
        for name, tally in t.items():
            out.append(
                f"- {name}: {tally.traces} traces: identical"
                f" {tally.traces - len(tally.differ)} / differ in {len(tally.differ)}"
            )
        for name, tally in t.items():
            if tally.paths:
                out += section(name, tally)
    return "\n".join(out) + "\n"


def section(name: str, tally: Tally) -> list[str]:
    out = [
        "",
        f"{name}, differing paths:",
        "",
        "| path | kind | traces | occurrences | examples (trace: before → after) |",
        "|---|---|---|---|---|",
    ]
    for (kind, path), slot in sorted(tally.paths.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        ex = "<br>".join(f"{md(t)}: `{md(b)}` → `{md(a)}`" for t, b, a in slot["ex"])
        out.append(f"| `{md(path)}` | {kind} | {len(slot['traces'])} | {slot['n']} | {ex} |")
    return out


# ---- main ----


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--before", type=Path, required=True, help="checkout of traceview with its .venv"
    )
    p.add_argument("--after", type=Path, required=True, help="checkout of traceview with its .venv")
    p.add_argument("--traces", type=Path, default=ROOT.parent / "shared" / "traces")
    p.add_argument("--out", type=Path, help="write the Markdown report here (default: stdout)")
    p.add_argument("--jobs", type=int, default=1, help="cases run at once (default 1)")
    p.add_argument("--timeout", type=float, default=900, help="seconds per traceview run")
    args = p.parse_args()
    sides = [discover("before", args.before.resolve()), discover("after", args.after.resolve())]
    with tempfile.TemporaryDirectory(prefix="tv-compare-") as t:
        tmp = Path(t)
        chrome, nsys = trace_files(args.traces.resolve(), tmp)
        cases, skipped = plan(sides[0], sides[1], chrome, nsys, make_run_dir(chrome, tmp))
        norm = Normaliser(tmp, sides)
        tallies = execute(cases, sides, tmp, args, norm)
        text = report(sides, args.traces, len(chrome) + len(nsys), skipped, tallies, norm)
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    total = sum(t["before→after"].traces for t in tallies.values())
    differ = sum(len(t["before→after"].differ) for t in tallies.values())
    warm = sum(len(t["after cold→warm"].differ) for t in tallies.values())
    print(
        f"compare_outputs: {total} cases in {len(tallies)} commands: {total - differ} identical,"
        f" {differ} differ; after cold≠warm: {warm}",
        file=sys.stdout if args.out else sys.stderr,
    )
    return 0


def execute(
    cases: list[Case], sides: list[Side], tmp: Path, args: argparse.Namespace, norm: Normaliser
) -> dict[str, dict[str, Tally]]:
    def one(i: int) -> tuple[Case, list[tuple[Run, Run]]]:
        case = cases[i]
        runs = [run_side(s, case, tmp / "work" / s.name / str(i), args.timeout) for s in sides]
        print(f"[{i + 1}/{len(cases)}] {case.label} {case.trace}", file=sys.stderr, flush=True)
        return case, runs

    tallies: dict[str, dict[str, Tally]] = {}
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for case, ((b_cold, b_warm), (a_cold, a_warm)) in pool.map(one, range(len(cases))):
            t = tallies.setdefault(
                case.label,
                {k: Tally() for k in ("before→after", "after cold→warm", "before cold→warm")},
            )
            t["before→after"].add(case.trace, compare(b_cold, a_cold, norm))
            t["after cold→warm"].add(case.trace, compare(a_cold, a_warm, norm))
            t["before cold→warm"].add(case.trace, compare(b_cold, b_warm, norm))
    return tallies


if __name__ == "__main__":
    sys.exit(main())
