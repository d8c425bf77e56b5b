"""``traceview mcp``: the commands as Model Context Protocol tools, over stdio.

Built on the SDK's low-level server: each tool's input schema is made from its command's own
options (traceview.cli.agent.tools), a JSON schema the low-level server publishes as it is,
where the high-level one would want a Python signature per tool to derive one from.

A call is checked (its arguments against the schema, its paths against the roots and the
out-dir), run as its command line in a worker process (traceview.cli.agent.worker) that
stays warm between calls, and its JSON cut to the token budget (traceview.app.agent.budget).
Up to ``WORKERS`` calls run at once, each in its own worker; a cancelled call's worker is
killed. Every failure reaches the agent as a tool error of one line, the CLI's own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
import orjson
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from traceview import __version__
from traceview.app.agent import budget
from traceview.app.agent.paths import Confinement
from traceview.cli.agent import tools
from traceview.errors import TraceviewError

WORKERS = 2  # calls at once (the machine's cores read a big trace: one call already uses two)
_LINE_LIMIT = 1 << 31  # a worker's answer line: a command's whole output
_ANSWERS_KEPT = 16  # the last commands' outputs, for the same question asked again
_ANSWER_KEPT_BYTES = 4 << 20  # not a --top 0 of 10^6 kernels (250 MB)

INSTRUCTIONS = """\
traceview analyses PyTorch profiler (kineto) Chrome traces, plain or gzip, and Nsight \
Systems SQLite exports, streaming, so a multi-GB trace is fine. Start with `summary` (where \
the GPU time went, with hints), then `kernels`, `gaps` (why the GPU idles), `steps`, `ops`, \
`memory`; `diff` compares two traces; `trim` cuts a gap or a step out for Perfetto. Each \
answer is the JSON of the CLI command in its `command` field, cut to a token budget: \
`left_out` says which tables were cut, and `offset` (or the tool's `top`) asks for more. \
`perfetto` gives the trim window of each gap or step shown. Paths are files under the \
server's roots."""


@dataclass(frozen=True)
class Settings:
    """The server's options (``traceview mcp``)."""

    where: Confinement
    max_tokens: int = budget.DEFAULT_MAX_TOKENS
    cache_dir: Path | None = None


class WorkerDied(Exception):
    pass


@dataclass
class Worker:
    """One worker process and its answers."""

    process: anyio.abc.Process
    answers: BufferedByteReceiveStream

    @classmethod
    async def start(cls, env: Mapping[str, str]) -> Worker:
        process = await anyio.open_process(
            [sys.executable, "-m", "traceview.cli.agent.worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None, env=dict(env),
        )  # fmt: skip
        assert process.stdout is not None
        return cls(process, BufferedByteReceiveStream(process.stdout))

    async def run(
        self, words: list[str], progress: Callable[[int, int | None], Awaitable[None]]
    ) -> tuple[int, str, str]:
        """``traceview WORDS`` in this worker: exit code, stdout, stderr."""
        assert self.process.stdin is not None
        base = last = 0  # a second read in one command goes on from the first: progress grows
        try:
            await self.process.stdin.send(orjson.dumps({"argv": words}) + b"\n")
            while True:
                line = await self.answers.receive_until(b"\n", _LINE_LIMIT)
                message = orjson.loads(line)
                if "progress" in message:
                    done, total = message["progress"]
                    if done < last:
                        base += last
                    last = done
                    await progress(base + done, None if total is None else base + total)
                else:
                    return message["exit"], message["stdout"], message["stderr"]
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.IncompleteRead) as e:
            raise WorkerDied from e

    def kill(self) -> None:
        if self.process.returncode is None:
            self.process.kill()


@dataclass
class Pool:
    """Up to WORKERS warm workers, each running one command at a time."""

    env: Mapping[str, str]
    idle: list[Worker] = field(default_factory=list)
    free: anyio.Semaphore = field(default_factory=lambda: anyio.Semaphore(WORKERS))
    warming: anyio.Event | None = None

    async def run(
        self, words: list[str], progress: Callable[[int, int | None], Awaitable[None]]
    ) -> tuple[int, str, str]:
        async with self.free:
            if not self.idle and self.warming is not None:
                await self.warming.wait()
            worker = self.idle.pop() if self.idle else await Worker.start(self.env)
            try:
                answer = await worker.run(words, progress)
            except BaseException:  # died, or the call was cancelled mid-command
                worker.kill()
                with anyio.CancelScope(shield=True):
                    await worker.process.wait()
                raise
            self.idle.append(worker)
            return answer

    async def prestart(self) -> None:
        """One worker started (and its imports made) before the first call, which waits for
        it rather than start another beside it."""
        self.warming = anyio.Event()
        try:
            self.idle.append(await Worker.start(self.env))
        except OSError:
            pass  # the first call starts one and says why it cannot
        finally:
            self.warming.set()

    async def close(self) -> None:
        for worker in self.idle:
            assert worker.process.stdin is not None
            await worker.process.stdin.aclose()
            with anyio.move_on_after(5):
                await worker.process.wait()
            worker.kill()
        self.idle.clear()


class Service:
    """The tools, their schemas, and how a call is answered."""

    def __init__(self, settings: Settings) -> None:
        import typer.main

        from traceview.cli import COMMANDS, _register

        self.settings = settings
        self.tools = {tool.name: tool for tool in tools.served(COMMANDS)}
        group = typer.main.get_command(_register(tuple(self.tools)))
        self.commands = {name: group.commands[name] for name in self.tools}  # type: ignore[attr-defined]
        self.schemas = {
            name: tools.input_schema(tool, self.commands[name]) for name, tool in self.tools.items()
        }
        env = dict(os.environ)
        if settings.cache_dir is not None:
            env["TRACEVIEW_CACHE_DIR"] = str(settings.cache_dir)
        self.pool = Pool(env)
        self.answers: OrderedDict[tuple[Any, ...], tuple[int, str, str]] = OrderedDict()

    def listing(self) -> list[types.Tool]:
        listed = []
        for name, tool in self.tools.items():
            help_text = (self.commands[name].help or "").split("\n\n")[0]
            returns = (
                f"Returns the JSON `traceview {name} -f json` prints, cut to the token budget."
                if tool.json
                else "Writes the file under the server's --out-dir; returns its path and size."
            )
            listed.append(
                types.Tool(
                    name=name,
                    description=f"{' '.join(help_text.split())} {returns}",
                    input_schema=self.schemas[name],
                    annotations=types.ToolAnnotations(
                        read_only_hint=not tool.writes,
                        destructive_hint=False,
                        idempotent_hint=True,
                        open_world_hint=False,
                    ),
                )
            )
        return listed

    async def call(
        self,
        name: str,
        arguments: Mapping[str, Any],
        progress: Callable[[int, int | None], Awaitable[None]],
    ) -> dict[str, Any]:
        """The answer to a call (raises TraceviewError with the one line to say)."""
        tool = self.tools.get(name)
        if tool is None:
            raise tools.unknown_tool(name, tuple(self.tools.values()))
        _validate(name, self.schemas[name], arguments)
        words = tools.argv(tool, self.commands[name], arguments, self.settings.where)
        try:
            code, out, err = await self._run(tool, words, progress)
        except WorkerDied:
            raise TraceviewError(
                f"{name}: the process running it ended abruptly (out of memory?)"
            ) from None
        said = [line for line in err.splitlines() if line.strip()]
        error = next(
            (line for line in reversed(said) if line.startswith("traceview: error:")), None
        )
        warnings = [line for line in said if line != error]
        if tool.json:
            try:
                result = orjson.loads(out) if out.strip() else None
            except orjson.JSONDecodeError:
                result = None
        else:
            result = (
                _written(tools.written(tool, self.commands[name], words), said)
                if code == 0
                else None
            )
            warnings = []
        if result is None:
            raise TraceviewError(_bare(error) or f"traceview {name} ended with exit code {code}")
        trace = words[1] if len(words) > 1 else ""
        frame = _framer(tool, tools.reproduce(words), trace, warnings, code, error)
        offset = int(arguments.get(tools.OFFSET) or 0)
        return budget.fit(result, self.settings.max_tokens, frame, offset)

    async def _run(
        self,
        tool: tools.Tool,
        words: list[str],
        progress: Callable[[int, int | None], Awaitable[None]],
    ) -> tuple[int, str, str]:
        """The command's output; a JSON one again from memory while its inputs are unchanged
        (paging a cut table with offset re-asks the same command)."""
        fresh = not tool.json or "--no-cache" in words or "--refresh" in words
        key = (tuple(words), tuple(_identity(word) for word in words))
        if not fresh and key in self.answers:
            self.answers.move_to_end(key)
            return self.answers[key]
        answer = await self.pool.run(words, progress)
        if not fresh and len(answer[1]) <= _ANSWER_KEPT_BYTES:
            self.answers[key] = answer
            while len(self.answers) > _ANSWERS_KEPT:
                self.answers.popitem(last=False)
        return answer


def _identity(word: str) -> tuple[int, ...] | None:
    """An input file's identity (device, inode, size, mtime); None for any other word."""
    if not word.startswith("/"):
        return None
    try:
        st = os.stat(word)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _validate(name: str, schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> None:
    """The arguments against the tool's schema: the first problem as a usage error."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    from traceview.errors import UsageError

    problem = best_match(Draft202012Validator(schema).iter_errors(dict(arguments)))
    if problem is not None:
        where = ".".join(map(str, problem.absolute_path))
        raise UsageError(f"{name}: {where + ': ' if where else ''}{problem.message}")


def _bare(line: str | None) -> str | None:
    """A CLI error line without its ``traceview: error:`` prefix."""
    return None if line is None else line.removeprefix("traceview: error:").strip()


def _written(paths: list[str], said: list[str]) -> dict[str, Any]:
    """What a writing command made: the files and their sizes, and what it said."""
    files = [{"path": path, "size_bytes": Path(path).stat().st_size} for path in paths]
    return {"written": files, "said": said}


def _framer(
    tool: tools.Tool,
    command: str,
    trace: str,
    warnings: list[str],
    code: int,
    error: str | None,
) -> budget.Frame:
    """The envelope of an answer: the command, what was cut, the trim windows, the result."""

    def frame(result: Any, cuts: list[budget.Cut]) -> dict[str, Any]:
        answer: dict[str, Any] = {"command": command}
        if cuts:
            answer["left_out"] = [
                {**cut.as_json(), "next_offset": cut.first - 1 + cut.shown} for cut in cuts
            ]
            answer["more"] = (
                "tables cut to the token budget: the same call with offset=N shows their "
                "rows from N+1 (next_offset); top=0 where the tool has it lists every row"
            )
        if tool.windows is not None and isinstance(result, dict):
            first = {".".join(cut.table): cut.first for cut in cuts}
            windows = tool.windows(result, trace, first)
            if windows:
                answer["perfetto"] = windows
        if warnings:
            answer["warnings"] = warnings[:20]
        if code:
            answer["exit_code"] = code
            answer["error"] = _bare(error)
        answer["result"] = result
        return answer

    return frame


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=f"traceview: error: {message}")], is_error=True
    )


def make_server(service: Service) -> Server[Any]:
    """The MCP server of ``service``'s tools."""

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=service.listing())

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        source = Path(str(params.arguments.get("trace", ""))).name if params.arguments else ""

        async def progress(done: int, total: int | None) -> None:
            await ctx.session.report_progress(done, total, f"reading {source}".strip())

        try:
            answer = await service.call(params.name, params.arguments or {}, progress)
        except TraceviewError as e:
            return _error(e.message)
        except Exception as e:  # a bug: one line, never a traceback
            return _error(f"internal error (please report it): {type(e).__name__}: {e}")
        text = budget.encode(answer).decode()
        return types.CallToolResult(content=[types.TextContent(text=text)])

    return Server(
        "traceview",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def serve(settings: Settings) -> None:
    """Serve over stdin and stdout until the client closes them."""
    service = Service(settings)
    server = make_server(service)

    async def main() -> None:
        try:
            async with stdio_server() as (read, write), anyio.create_task_group() as tasks:
                tasks.start_soon(service.pool.prestart)
                await server.run(read, write, server.create_initialization_options())
                tasks.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await service.pool.close()

    anyio.run(main)
