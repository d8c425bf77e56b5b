"""traceview mcp as an agent meets it: questions in a row on one trace, timed at the client.

    python benchmarks/bench_mcp.py [TRACE] [--cache-dir DIR] [--tools summary kernels ...]

Starts ``traceview mcp --root <the trace's directory>`` with the SDK's stdio client, and
prints the time to initialize, then each call's wall time (perf_counter around call_tool),
the answer's size and estimated tokens, and the progress notifications it got. Without
``--cache-dir`` the cache is a new empty directory, so the first question reads the trace
and the next ones come from the cache. Default trace: ../shared/traces/h200/big.json.gz.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from traceview.app.agent.budget import estimate_tokens

ROOT = Path(__file__).resolve().parents[1]
BIG = ROOT.parent / "shared" / "traces" / "h200" / "big.json.gz"
TOOLS = ["summary", "kernels", "gaps", "steps", "ops", "memory", "summary"]


async def bench(trace: Path, cache: Path, tools: list[str]) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "traceview", "mcp", "--root", str(trace.parent)],
        env={"TRACEVIEW_CACHE_DIR": str(cache)},
    )
    start = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        print(f"initialize {time.perf_counter() - start:6.2f} s")
        for name in tools:
            notes = 0

            async def progress(done: float, total: float | None, message: str | None) -> None:
                nonlocal notes
                notes += 1

            start = time.perf_counter()
            result = await session.call_tool(
                name, {"trace": trace.name}, progress_callback=progress
            )
            took = time.perf_counter() - start
            text = result.content[0].text  # type: ignore[union-attr]
            error = " ERROR" if result.is_error else ""
            print(
                f"{name:10s} {took:6.2f} s {len(text):7,} bytes {estimate_tokens(text):6,} "
                f"tokens {notes:3} progress notes{error}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", type=Path, nargs="?", default=BIG)
    parser.add_argument("--cache-dir", type=Path)
    parser.add_argument("--tools", nargs="+", default=TOOLS)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        cache = args.cache_dir or Path(scratch)
        anyio.run(bench, args.trace.resolve(), cache, args.tools)


if __name__ == "__main__":
    main()
