"""The process that runs ``traceview mcp``'s commands: the command line itself, kept warm.

The server starts it (``python -m traceview.cli.agent.worker``) and sends one command line a
line (JSON); it runs each as ``traceview`` would, in this one-threaded process (reading a
trace forks, which a server's threads would make unsafe), with stdout and stderr captured,
and answers on its own stdout, one JSON object a line: ``{"progress": [done, total]}`` while
it reads, then ``{"exit": code, "stdout": ..., "stderr": ...}``. Its imports stay loaded
between calls, so a second question on a trace in the cache costs no start-up. Anything
else that writes to the process's fd 1 lands on stderr, never in the answers.
"""

from __future__ import annotations

import io
import os
import sys
from typing import Any, TextIO

import orjson


class _Captured(io.StringIO):
    """A captured stdout or stderr: text, UTF-8 (as a terminal's), not a terminal."""

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"


def run(words: list[str]) -> tuple[int, str, str]:
    """``traceview WORDS``: its exit code, stdout and stderr."""
    from traceview.cli import main

    out, err = _Captured(), _Captured()
    saved = sys.argv, sys.stdout, sys.stderr
    sys.argv, sys.stdout, sys.stderr = ["traceview", *words], out, err
    code = 0
    try:
        main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException as e:  # TRACEVIEW_DEBUG re-raises a bug: still one line here
        code = 1
        err.write(f"traceview: error: internal error: {type(e).__name__}: {e}\n")
    finally:
        sys.argv, sys.stdout, sys.stderr = saved
    return code, out.getvalue(), err.getvalue()


def serve(requests: TextIO, answers: TextIO) -> None:
    """Answer each request line until the server closes the pipe."""
    from traceview.render import output

    me = os.getpid()

    def progress(done: int, total: int | None) -> None:
        if os.getpid() == me:  # not a forked reader's
            _send(answers, {"progress": [done, total]})

    output.progress_listener = progress
    for line in requests:
        if not line.strip():
            continue
        code, out, err = run(orjson.loads(line)["argv"])
        _send(answers, {"exit": code, "stdout": out, "stderr": err})


def _send(answers: TextIO, message: dict[str, Any]) -> None:
    answers.write(orjson.dumps(message).decode() + "\n")
    answers.flush()


def warm_up() -> None:
    """Import what every command reading a trace imports, before the first call comes."""
    import traceview.app.commands
    import traceview.cache.store
    import traceview.cli.common
    import traceview.columns.model
    import traceview.render.document  # noqa: F401


def main() -> None:
    """The answers go to the fd 1 the server reads; fd 1 itself then points at stderr."""
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", closefd=False), encoding="utf-8")
    warm_up()
    serve(sys.stdin, answers)


if __name__ == "__main__":
    main()
