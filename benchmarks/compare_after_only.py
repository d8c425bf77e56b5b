"""Cold vs warm on one checkout for what compare_outputs.py cannot compare with an older one.

    python benchmarks/compare_after_only.py --after DIR [--traces ../shared/traces]

The cases: unique and ops --group-by op+shapes on every real trace, and the run-level commands
(ranks, kernels/steps --per-rank, gaps, diff, snapshot of a run) on the 8 DLRM ranks. Each runs
cold then warm in an empty cache dir with DIR's .venv; the two JSON outputs are compared as in
compare_outputs.py. One line per case, then a total; exit 0.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location(
    "compare_outputs", ROOT / "benchmarks" / "compare_outputs.py"
)
assert spec is not None and spec.loader is not None
co = importlib.util.module_from_spec(spec)
sys.modules["compare_outputs"] = co
spec.loader.exec_module(co)


def cases(traces: list[Path], run_dir: Path | None) -> list[Any]:
    """compare_outputs.Case values (the module is loaded by path, so typed Any here)."""
    out = []
    for p in traces:
        out.append(co.Case("unique", p.name, ("unique", str(p), "-f", "json", "-q"), "stdout"))
        argv: tuple[str, ...] = ("ops", str(p), "--group-by", "op+shapes", "-f", "json", "-q")
        out.append(co.Case("ops --group-by op+shapes", p.name, argv, "stdout"))
    if run_dir is None:
        return out
    run = str(run_dir)
    for args in (
        ["ranks"],
        ["kernels"],
        ["kernels", "--per-rank"],
        ["gaps"],
        ["steps"],
        ["steps", "--per-rank"],
        ["diff", run],
        ["diff", run, "--per-rank"],
    ):
        argv = (args[0], run, *args[1:], "-f", "json", "-q")
        out.append(
            co.Case(" ".join(a for a in args if a != run) + " RUN", "dlrm run", argv, "stdout")
        )
    out.append(co.Case("snapshot RUN", "dlrm run", ("snapshot", run, "-o", "{out}", "-q"), "file"))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--after", type=Path, required=True, help="checkout of traceview with its .venv")
    p.add_argument("--traces", type=Path, default=ROOT.parent / "shared" / "traces")
    args = p.parse_args()
    side = co.discover("after", args.after.resolve())
    with tempfile.TemporaryDirectory(prefix="tv-after-only-") as t:
        tmp = Path(t)
        chrome, nsys = co.trace_files(args.traces.resolve(), tmp)
        todo = cases(chrome + nsys, co.make_run_dir(chrome, tmp))
        norm = co.Normaliser(tmp, [side])
        differ = 0
        for i, case in enumerate(todo):
            cold, warm = co.run_side(side, case, tmp / "work" / str(i), 900)
            found = co.compare(cold, warm, norm)
            differ += bool(found)
            shown = "identical" if not found else "; ".join(f"{f.kind} {f.path}" for f in found[:3])
            print(
                f"{case.label} | {case.trace} | exit {cold.code}/{warm.code} | {shown}", flush=True
            )
    print(f"compare_after_only: {len(todo)} cases cold vs warm, {differ} differ")
    return 0


if __name__ == "__main__":
    sys.exit(main())
