"""The tools ``traceview mcp`` serves: one entry per command, everything else derived.

A tool is its command: its input schema is made from the options the command's module
(``traceview/cli/<name>.py``) declares, so the names (``group_by`` for ``--group-by``), the
types, the choices, the minimums and the defaults are the CLI's own and cannot drift; a call
becomes that command's argument list, run as the CLI runs it, with ``-f json``. The options
that choose where output goes or how the process behaves are the server's, not the agent's
(``SERVER_OWNED``); paths are checked against the roots and the out-dir first.

Adding a tool is one ``Tool`` entry below (``windows`` when its rows have a place in time).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from typer._click.core import Command, Parameter
from typer._click.types import BoolParamType, FloatParamType, IntParamType, IntRange
from typer._types import TyperChoice as Choice
from typer.core import TyperArgument as Argument

from traceview.app.agent.paths import Confinement
from traceview.errors import UsageError

# A tool's rows that have a place in time, as the trim commands that cut them out for
# Perfetto: (the result as shown, the trace, the 1-based number of each table's first row).
Windows = Callable[[Mapping[str, Any], str, Mapping[str, int]], list[dict[str, Any]]]


@dataclass(frozen=True)
class Tool:
    """One command served as a tool.

    ``json``: the command prints JSON with ``-f json`` (else the server says what it wrote);
    ``writes``: its options that name a file it writes (under --out-dir); ``windows``: see
    ``Windows``."""

    name: str
    json: bool = True
    writes: tuple[str, ...] = ()
    windows: Windows | None = None


def _gap_windows(
    result: Mapping[str, Any], trace: str, first: Mapping[str, int]
) -> list[dict[str, Any]]:
    """Each largest gap shown (#K as gaps numbers it) with trim's window around it."""
    from traceview.render.trim_command import gap_window, trim_command

    number = first.get("largest", 1)
    windows = []
    for k, gap in enumerate(result.get("largest") or (), start=number):
        ts_ns, gap_ns = round(gap["ts_us"] * 1000), round(gap["gap_us"] * 1000)
        windows.append({"gap": k, "window": gap_window(ts_ns, gap_ns),
                        "trim": trim_command(trace, ts_ns, gap_ns, k)})  # fmt: skip
    return windows


def _step_windows(
    result: Mapping[str, Any], trace: str, first: Mapping[str, int]
) -> list[dict[str, Any]]:
    """Each step shown, with the trim command that keeps it."""
    quoted = shlex.quote(trace)
    return [
        {"step": row["step"], "pstep": str(row["step"]),
         "trim": f"traceview trim {quoted} --pstep {row['step']} -o step{row['step']}.json.gz"}
        for row in result.get("steps") or ()
        if isinstance(row.get("step"), int)
    ]  # fmt: skip


TOOLS: tuple[Tool, ...] = (
    Tool("summary"),
    Tool("kernels"),
    Tool("gaps", windows=_gap_windows),
    Tool("steps", windows=_step_windows),
    Tool("ops"),
    Tool("memory"),
    Tool("diff"),
    Tool("trim", json=False, writes=("output",)),
)

# ---- Commands being written in parallel: each is served once its name is in COMMANDS. ----
# An entry here is all a new command needs; give it ``windows`` when its rows (findings,
# source lines) have a time window.
PENDING: tuple[Tool, ...] = (
    Tool("source"),
    Tool("audit"),
)
# ------------------------------------------------------------------------------------------

# Options the server decides: the output's format and file, overwriting, the progress bar,
# a terminal's width, the cache's place, and runs of several ranks (directories and globs
# that would reach past the roots).
SERVER_OWNED = frozenset(
    {"fmt", "save", "force", "quiet", "wide", "cache_dir", "per_rank", "glob", "rank_regex",
     "jobs", "engine", "scheduler", "scheduler_file"}
)  # fmt: skip
UNDER_A_ROOT = "A file under one of the server's roots (a relative path: from the first root)."
TRACE = (
    "Trace file: Chrome trace JSON, plain or gzip (.json, .json.gz), or an Nsight Systems "
    f"SQLite export. {UNDER_A_ROOT}"
)
OFFSET = "offset"  # the server's own argument on every tool: the rows a cut table starts at


def served(commands: Sequence[str]) -> tuple[Tool, ...]:
    """The tools of the commands this traceview has."""
    return tuple(tool for tool in (*TOOLS, *PENDING) if tool.name in commands)


def parameters(tool: Tool, command: Command) -> list[Parameter]:
    """The command's parameters an agent gives: all but the server's (a file it reads:
    always; a file it writes: only when the tool's entry says so)."""
    own = [p for p in command.params if p.name and p.name not in SERVER_OWNED]
    return [p for p in own if p.name != "output" or "output" in tool.writes]


def input_schema(tool: Tool, command: Command) -> dict[str, Any]:
    """The JSON schema of the tool's arguments, from the command's parameters."""
    properties: dict[str, Any] = {}
    required = []
    for param in parameters(tool, command):
        assert param.name is not None
        if param.name == OFFSET:
            raise AssertionError(f"{tool.name}: an option named {OFFSET} hides the server's")
        properties[param.name] = _property(param)
        if param.required or isinstance(param, Argument):  # gaps' last trace: not served
            required.append(param.name)
    properties[OFFSET] = {
        "type": "integer", "minimum": 0, "default": 0,
        "description": "The tables the token budget cut (the answer's left_out) start at this "
        "row (0-based): the same call with offset = the rows shown gives the next ones.",
    }  # fmt: skip
    return {"type": "object", "properties": properties, "required": required,
            "additionalProperties": False}  # fmt: skip


def _property(param: Parameter) -> dict[str, Any]:
    kind = param.type
    schema: dict[str, Any]
    if isinstance(kind, Choice):
        schema = {"type": "string", "enum": [str(c) for c in kind.choices]}
    elif isinstance(kind, BoolParamType):
        schema = {"type": "boolean"}
    elif isinstance(kind, IntRange | IntParamType):
        schema = {"type": "integer"}
        if isinstance(kind, IntRange):
            if kind.min is not None:
                schema["minimum"] = kind.min
            if kind.max is not None:
                schema["maximum"] = kind.max
    elif isinstance(kind, FloatParamType):
        schema = {"type": "number"}
    else:
        schema = {"type": "string"}
    many = param.multiple or (isinstance(param, Argument) and param.nargs == -1)
    if many and not isinstance(param, Argument):
        schema = {"type": "array", "items": schema}
    default = param.default
    if default is not None and not callable(default) and not many:
        schema["default"] = default.value if isinstance(default, Enum) else default
    help_text = getattr(param, "help", None)
    if isinstance(param, Argument):  # one file, not a pipe nor a run's directory or glob
        help_text = (TRACE if param.name == "trace" else f"{help_text} {UNDER_A_ROOT}").strip()
    flag = _flag(param)
    if help_text:
        schema["description"] = f"{help_text} (CLI: {flag})" if flag else help_text
    return schema


def _flag(param: Parameter) -> str | None:
    """The option's long name as typed on the command line (None: an argument)."""
    if isinstance(param, Argument):
        return None
    return max(param.opts, key=len)


def argv(
    tool: Tool, command: Command, arguments: Mapping[str, Any], where: Confinement
) -> list[str]:
    """The command line (after ``traceview``) a call runs: its paths checked and resolved."""
    words = [tool.name]
    options: list[str] = []
    for param in parameters(tool, command):
        assert param.name is not None
        if param.name not in arguments or arguments[param.name] is None:
            continue
        value = arguments[param.name]
        values = value if isinstance(value, list) else [value]
        if _is_path(param):
            values = [_checked(tool, param, str(v), where) for v in values]
        flag = _flag(param)
        if flag is None:
            words += map(str, values)
        elif isinstance(param.type, BoolParamType):
            options += [flag] if value else []
        else:
            for item in values:
                options += [flag, str(item)]
    return [*words, *options, *(["-f", "json"] if tool.json else [])]


def written(tool: Tool, command: Command, words: Sequence[str]) -> list[str]:
    """The files a command line of this tool writes (the values of its ``writes`` options)."""
    flags = {_flag(p) for p in command.params if p.name in tool.writes}
    return [words[i + 1] for i, word in enumerate(words[:-1]) if word in flags]


def _is_path(param: Parameter) -> bool:
    return type(param.type).__name__ in ("TyperPath", "Path")


def _checked(tool: Tool, param: Parameter, text: str, where: Confinement) -> str:
    """A path option's value: confined to the out-dir when the tool writes it, else to the
    roots."""
    if param.name in tool.writes:
        return str(where.writable(text))
    return str(where.readable(text))


def reproduce(words: Sequence[str]) -> str:
    """The command line a user types to get the same output."""
    return shlex.join(["traceview", *words])


def unknown_tool(name: str, tools: Sequence[Tool]) -> UsageError:
    names = ", ".join(tool.name for tool in tools)
    return UsageError(f"no tool {name!r}; the tools are {names}")
