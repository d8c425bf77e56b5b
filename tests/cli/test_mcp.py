"""``traceview mcp`` driven by the SDK's own client over stdio, as an agent host drives it:
initialize, the tools and their schemas, every tool on real traces against the CLI's JSON,
budgets, paging, bad arguments, paths outside the roots, a missing trace, progress on the
big trace, two calls at once. One server for the module (its start-up is seconds)."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import SHARED_TRACES, run_cli

pytest.importorskip("mcp")

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from traceview.app.agent.budget import estimate_tokens

H200 = SHARED_TRACES / "h200"
SMALL = H200 / "graphs.json.gz"
BUDGET = 2_000

pytestmark = pytest.mark.skipif(not H200.is_dir(), reason="../shared/traces is absent")


@dataclass
class Client:
    """A session with the server, called from the test's thread."""

    portal: BlockingPortal
    session: ClientSession
    out_dir: Path
    scratch: Path

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        result = self.portal.call(self.session.call_tool, name, arguments)
        (content,) = result.content
        return result.is_error, content.text  # type: ignore[union-attr]

    def answer(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        error, text = self.call(name, arguments)
        assert not error, text
        assert estimate_tokens(text) <= BUDGET
        return json.loads(text)  # type: ignore[no-any-return]

    def error(self, name: str, arguments: dict[str, Any]) -> str:
        error, text = self.call(name, arguments)
        assert error, text
        assert len(text.splitlines()) == 1 and text.startswith("traceview: error: "), text
        return text.removeprefix("traceview: error: ")


@asynccontextmanager
async def _session(params: StdioServerParameters) -> AsyncIterator[ClientSession]:
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    out_dir, scratch = tmp_path_factory.mktemp("out"), tmp_path_factory.mktemp("scratch")
    cache = tmp_path_factory.mktemp("mcp-cache")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "traceview", "mcp", "--root", str(SHARED_TRACES), "--root", str(scratch),
              "--out-dir", str(out_dir), "--max-tokens", str(BUDGET)],
        env={"TRACEVIEW_CACHE_DIR": str(cache), "PYTHONPATH": str(Path(__file__).parents[2])},
        cwd=str(scratch),
    )  # fmt: skip
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(_session(params)) as session,
    ):
        yield Client(portal, session, out_dir, scratch)


def _cli_json(command: str) -> Any:
    """What the answer's command prints, run as a user runs it."""
    words = shlex.split(command)
    assert words[0] == "traceview" and words[-2:] == ["-f", "json"]
    done = run_cli(*words[1:])
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


def _cut_like(cli: Any, left_out: list[dict[str, Any]]) -> Any:
    """The CLI's JSON with each table the answer cut shown as the answer says it is."""
    for cut in left_out:
        *parents, last = cut["table"].split(".")
        holder = cli
        for key in parents:
            holder = holder[key]
        rows = holder[last]
        assert len(rows) == cut["of"]
        holder[last] = rows[cut["first"] - 1 : cut["first"] - 1 + cut["shown"]]
    return cli


def test_initialize_lists_every_tool_with_the_clis_options(client: Client) -> None:
    import typer.main

    from traceview.cli import app
    from traceview.cli.agent.tools import SERVER_OWNED

    listed = client.portal.call(client.session.list_tools).tools
    tools = {tool.name: tool for tool in listed}
    assert {"summary", "kernels", "gaps", "steps", "ops", "memory", "diff", "trim"} <= set(tools)
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    for name, tool in tools.items():
        schema = tool.input_schema
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        props = schema["properties"]
        assert props["offset"] == {**props["offset"], "type": "integer", "minimum": 0}
        assert not SERVER_OWNED & set(props), name
        for param in commands[name].params:
            if param.name in SERVER_OWNED or (param.name == "output" and name != "trim"):
                continue
            assert param.name in props, (name, param.name)
            if param.required:
                assert param.name in schema["required"]
    kernels = tools["kernels"].input_schema["properties"]
    assert kernels["top"] == {**kernels["top"], "type": "integer", "minimum": 0, "default": 10}
    assert kernels["sort"]["default"] == "duration-percentage"
    assert "fused-op" in kernels["group_by"]["enum"]
    assert kernels["verbose"]["type"] == "boolean"
    assert tools["gaps"].input_schema["properties"]["stream"]["type"] == "array"
    assert tools["trim"].input_schema["required"] == ["trace", "output"]
    assert tools["trim"].annotations.read_only_hint is False  # type: ignore[union-attr]
    assert tools["summary"].annotations.read_only_hint is True  # type: ignore[union-attr]


CALLS = [
    ("summary", {"trace": "h200/graphs.json.gz"}),
    ("kernels", {"trace": str(SMALL), "top": 5, "group_by": "category"}),
    ("gaps", {"trace": "h200/train.json.gz", "min_gap": "1ms"}),
    ("steps", {"trace": "h200/train.json.gz"}),
    ("ops", {"trace": "h200/eager.json.gz", "top": 3}),
    ("memory", {"trace": "h200/graphs.json.gz"}),
    ("diff", {"base": "h200/eager.json.gz", "new": "h200/compiled2.json.gz", "top": 3}),
]


@pytest.mark.parametrize(("name", "arguments"), CALLS, ids=[c[0] for c in CALLS])
def test_every_tool_answers_the_clis_json_within_the_budget(
    client: Client, name: str, arguments: dict[str, Any]
) -> None:
    answer = client.answer(name, arguments)
    command = answer["command"]
    assert command.startswith(f"traceview {name} ") and command.endswith(" -f json")
    cli = _cli_json(command)
    assert answer["result"] == _cut_like(cli, answer.get("left_out", []))


def test_gaps_and_steps_give_the_trim_window_of_each_row_shown(client: Client) -> None:
    gaps = client.answer("gaps", {"trace": "h200/train.json.gz", "largest": 3, "gap_top": 2})
    windows = gaps["perfetto"]
    assert [w["gap"] for w in windows] == [1, 2, 3][: len(gaps["result"]["largest"])]
    trace = str(H200.resolve() / "train.json.gz")
    for window, gap in zip(windows, gaps["result"]["largest"], strict=True):
        start, end = (float(side.lstrip("@")) for side in window["window"].split(":"))
        assert start == pytest.approx(gap["ts_us"] - 2000, abs=0.01)
        assert end == pytest.approx(gap["ts_us"] + gap["gap_us"] + 2000, abs=0.01)
        assert window["trim"] == (
            f"traceview trim {trace} --window {window['window']} -o gap{window['gap']}.json.gz"
        )
    steps = client.answer("steps", {"trace": "h200/graphs.json.gz"})
    numbers = [row["step"] for row in steps["result"]["steps"]]
    assert [w["step"] for w in steps["perfetto"]] == numbers
    assert steps["perfetto"][0]["trim"].endswith(
        f"--pstep {numbers[0]} -o step{numbers[0]}.json.gz"
    )


def test_a_cut_table_pages_on_with_offset(client: Client) -> None:
    arguments: dict[str, Any] = {"trace": "h200/train.json.gz", "top": 0}
    first = client.answer("kernels", arguments)
    cut = max(first["left_out"], key=lambda c: c["of"])  # every kernel: cut to the budget
    assert first["more"] and cut["first"] == 1 and 0 < cut["shown"] < cut["of"]
    page = client.answer("kernels", {**arguments, "offset": cut["next_offset"]})
    (again,) = [c for c in page["left_out"] if c["table"] == cut["table"]]
    assert again["first"] == cut["shown"] + 1 and again["of"] == cut["of"]
    rows = _cli_json(first["command"])[cut["table"]]
    assert first["result"][cut["table"]] == rows[: cut["shown"]]
    assert page["result"][cut["table"]] == rows[cut["shown"] : cut["shown"] + again["shown"]]


def test_trim_writes_a_new_file_under_the_out_dir_only(client: Client) -> None:
    answer = client.answer(
        "trim", {"trace": "h200/graphs.json.gz", "output": "step3.json.gz", "pstep": "3"}
    )
    written = client.out_dir.resolve() / "step3.json.gz"
    assert answer["result"]["written"] == [
        {"path": str(written), "size_bytes": written.stat().st_size}
    ]
    assert answer["command"].startswith("traceview trim ")
    assert "-f" not in shlex.split(answer["command"])
    assert "exists" in client.error(
        "trim", {"trace": "h200/graphs.json.gz", "output": "step3.json.gz", "pstep": "3"}
    )
    for output in ("../escape.json.gz", str(client.scratch / "x.json.gz")):
        said = client.error("trim", {"trace": "h200/graphs.json.gz", "output": output})
        assert "outside the out-dir" in said
    assert not (client.out_dir.parent / "escape.json.gz").exists()


@pytest.mark.parametrize(
    ("name", "arguments", "said"),
    [
        ("kernels", {"trace": "h200/graphs.json.gz", "top": -1}, "top: -1 is less than"),
        ("kernels", {"trace": "h200/graphs.json.gz", "top": "5"}, "top: '5' is not of type"),
        ("kernels", {"trace": "h200/graphs.json.gz", "sort": "bogus"}, "sort: 'bogus' is not one"),
        ("kernels", {"trace": "h200/graphs.json.gz", "format": "csv"}, "'format' was unexpected"),
        ("kernels", {}, "'trace' is a required property"),
        ("gaps", {}, "'trace' is a required property"),  # not the CLI's last trace
        ("kernels", {"trace": "h200/graphs.json.gz", "pstep": "5-3"}, "--pstep '5-3': range"),
        ("gaps", {"trace": "h200/graphs.json.gz", "min_gap": "5xs"}, "--min-gap '5xs': expect"),
        ("nonsense", {"trace": "h200/graphs.json.gz"}, "no tool 'nonsense'; the tools are"),
        ("summary", {"trace": "h200/missing.json.gz"}, "h200/missing.json.gz: no such file"),
        ("summary", {"trace": "/etc/passwd"}, "/etc/passwd: outside the roots"),
        ("summary", {"trace": "../../../etc/passwd"}, "outside the roots"),
        ("summary", {"trace": "h200"}, "h200: a directory, not a file"),
        ("summary", {"trace": "-"}, "standard input is not served"),
        ("diff", {"base": "h200/eager.json.gz", "new": "/etc/hosts"}, "outside the roots"),
    ],
)
def test_bad_calls_are_tool_errors_of_one_line(
    client: Client, name: str, arguments: dict[str, Any], said: str
) -> None:
    assert said in client.error(name, arguments)


def test_symlinks_out_of_the_roots_and_fifos_are_refused(client: Client) -> None:
    link, fifo = client.scratch / "link.json", client.scratch / "fifo.json"
    link.symlink_to("/etc/hostname")
    os.mkfifo(fifo)
    assert "outside the roots" in client.error("summary", {"trace": str(link)})
    assert "a FIFO, not a file" in client.error("summary", {"trace": str(fifo)})
    # inside the roots, a symlink is followed
    inner = client.scratch / "inner.json.gz"
    inner.symlink_to(SMALL)
    assert client.answer("memory", {"trace": str(inner)})["result"]


def test_not_a_trace_is_the_clis_one_line_error(client: Client) -> None:
    (client.scratch / "notes.txt").write_text("not json at all\n")
    said = client.error("kernels", {"trace": str(client.scratch / "notes.txt")})
    done = run_cli("kernels", str(client.scratch / "notes.txt"), "-f", "json")
    assert done.stderr.strip() == f"traceview: error: {said}"


def test_two_calls_at_once_are_both_answered(client: Client) -> None:
    calls = [("kernels", {"trace": "h200/eager.json.gz", "top": 4}),
             ("gaps", {"trace": "h200/compiled2.json.gz", "largest": 2})]  # fmt: skip

    async def both() -> list[Any]:
        results: list[Any] = [None, None]

        async def one(i: int) -> None:
            results[i] = await client.session.call_tool(*calls[i])

        async with anyio.create_task_group() as tasks:
            for i in range(2):
                tasks.start_soon(one, i)
        return results

    for result in client.portal.call(both):
        assert not result.is_error
        answer = json.loads(result.content[0].text)
        cli = _cli_json(answer["command"])
        assert answer["result"] == _cut_like(cli, answer.get("left_out", []))


def test_a_question_asked_again_is_answered_anew_when_its_trace_changed(client: Client) -> None:
    copy = client.scratch / "changing.json.gz"
    copy.write_bytes(SMALL.read_bytes())
    arguments = {"trace": str(copy), "top": 2}
    first = client.answer("kernels", arguments)
    assert client.answer("kernels", arguments) == first
    copy.write_bytes((H200 / "eager.json.gz").read_bytes())
    again = client.answer("kernels", arguments)
    assert again["result"]["trace"]["events_read"] != first["result"]["trace"]["events_read"]
    assert again["result"] == _cut_like(_cli_json(again["command"]), again.get("left_out", []))


def test_the_big_trace_reports_progress_then_answers_from_the_cache(client: Client) -> None:
    seen: list[tuple[float, float | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total))

    def call(name: str) -> tuple[dict[str, Any], int]:
        before = len(seen)
        result = client.portal.call(
            lambda: client.session.call_tool(
                name, {"trace": "h200/big.json.gz"}, progress_callback=progress
            )
        )
        assert not result.is_error, result.content
        text = result.content[0].text  # type: ignore[union-attr]
        assert estimate_tokens(text) <= BUDGET
        return json.loads(text), len(seen) - before

    summary, first_progress = call("summary")
    assert first_progress >= 2
    dones = [done for done, _ in seen]
    assert dones == sorted(dones) and seen[-1][1]
    assert summary["result"]["trace"]["events_read"] > 1_000_000
    _, second_progress = call("kernels")  # from the cache: nothing read
    assert second_progress == 0


def test_without_the_sdk_the_command_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.util

    from typer.testing import CliRunner

    from traceview.cli import app

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "mcp" else real(name, *a)
    )
    done = CliRunner().invoke(app, ["mcp"])
    assert done.exit_code == 1
    assert done.output.strip().splitlines() == [
        "traceview: error: traceview mcp needs the MCP SDK: pip install 'traceview[mcp]'"
    ]


def test_the_docs_example_exchange_is_what_the_server_answers(client: Client) -> None:
    from conftest import ROOT

    blocks = re.findall(r"^```json\n(.*?)^```", (ROOT / "docs" / "mcp.md").read_text(), re.M | re.S)
    (request,) = [json.loads(b) for b in blocks if '"tools/call"' in b]
    (documented,) = [b for b in blocks if '"left_out"' in b]
    expected = json.loads(documented.replace("/data/traces", str(SHARED_TRACES.resolve())))
    params = request["params"]
    answer = client.answer(params["name"], params["arguments"])
    shown = expected.pop("result")
    assert {key: answer[key] for key in expected} == expected
    assert {key: answer["result"][key] for key in shown} == shown  # abbreviated in the docs


def test_a_failed_gate_and_warnings_come_with_the_answer(client: Client) -> None:
    failed = client.answer(
        "diff",
        {"base": "h200/compiled2.json.gz", "new": "h200/eager.json.gz", "max_regression": "1%"},
    )
    done = run_cli(*shlex.split(failed["command"])[1:])
    assert done.returncode == failed["exit_code"] == 1
    assert done.stderr.strip().splitlines()[-1] == f"traceview: error: {failed['error']}"
    assert (
        failed["result"]["gate"]
        == _cut_like(json.loads(done.stdout), failed.get("left_out", []))["gate"]
    )
    warned = client.answer("kernels", {"trace": "h200/graphs.json.gz", "name": "^no such kernel$"})
    assert warned["warnings"] == [
        "traceview: warning: --name '^no such kernel$' matches no kernel of this trace"
    ]


def test_a_worker_that_dies_fails_its_call_and_is_replaced(tmp_path: Path) -> None:
    from traceview.cli.agent.server import Pool, WorkerDied

    words = ["kernels", str(SMALL), "--top", "1", "-f", "json"]

    async def quiet(done: int, total: int | None) -> None:
        pass

    async def go() -> None:
        pool = Pool({**os.environ, "TRACEVIEW_CACHE_DIR": str(tmp_path)})
        code, out, _ = await pool.run(words, quiet)
        assert code == 0 and json.loads(out)["kernels"]
        (worker,) = pool.idle
        worker.process.kill()
        await worker.process.wait()
        with pytest.raises(WorkerDied):
            await pool.run(words, quiet)
        assert pool.idle == []
        code, again, _ = await pool.run(words, quiet)  # a new worker
        assert code == 0 and again == out
        await pool.close()

    anyio.run(go)


def test_source_and_audit_are_served_and_answer_the_clis_json(client: Client) -> None:
    """The tools of the commands written beside the server (tools.PENDING) are listed once
    their command exists, with the CLI's options, and answer what the CLI prints."""
    import typer.main

    from traceview.cli import app

    tools = {t.name: t for t in client.portal.call(client.session.list_tools).tools}
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    stacks = "tracelens__h100__gaunernst_bert-small-uncased__1016001.json.gz"
    if not (SHARED_TRACES / stacks).exists():
        pytest.skip(f"{stacks} is absent")
    for name, arguments in (
        ("source", {"trace": stacks, "by": "module", "top": 5}),
        ("source", {"trace": stacks}),
        ("audit", {"trace": stacks}),
    ):
        assert name in tools and name in commands
        props = tools[name].input_schema["properties"]
        assert {"trace", "offset"} <= set(props)
        if name == "source":
            assert props["by"]["default"] == "frame" and "module" in props["by"]["enum"]
        answer = client.answer(name, arguments)
        command = answer["command"]
        assert command.startswith(f"traceview {name} ") and command.endswith(" -f json")
        cli = _cli_json(command)
        assert answer["result"] == _cut_like(cli, answer.get("left_out", []))
    audit = answer["result"]
    launch = next(c for c in audit["checks"] if c["id"] == "launch-without-gpu")
    assert launch["count"] == 22  # the trace's memsets with no activity (test_audit.PINNED)
