"""Every error as one line: click's usage errors (unknown option, missing argument, --top -1)
and whatever a command raises.

Typer prints usage errors as a boxed panel under the usage text; traceview says every error the
same way: ``traceview: error: ...`` on stderr, exit 2 for a usage error, else 1 (130 on Ctrl-C).
"""

from __future__ import annotations

import ast
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

# typer vendors click; its exceptions are not re-exported (only BadParameter is).
from typer import Abort, Exit
from typer._click.core import Context
from typer._click.exceptions import (
    BadParameter,
    ClickException,
    MissingParameter,
    NoArgsIsHelpError,
    NoSuchOption,
    UsageError,
)
from typer._click.types import IntRange
from typer._types import TyperChoice
from typer.core import TyperGroup

from traceview.choices import expected_one_of
from traceview.errors import USAGE_ERROR, Terminated, TraceviewError

SIGTERM_EXIT = 128 + signal.SIGTERM


class OneLineErrors(TyperGroup):
    """The root group: parses and runs as typer does, but reports every error in one line."""

    def invoke(self, ctx: Context) -> Any:
        """Run the command; turn what it raises into one line on stderr and an exit code."""
        try:
            return super().invoke(ctx)
        except TraceviewError as e:
            _exit(e.message, e.exit_code)
        except BrokenPipeError:  # the reader of stdout went away (| head): not an error
            sys.stderr.close()
            raise Exit(0) from None
        except OSError as e:  # a file the command could not read or write
            where = f"{e.filename}: " if e.filename is not None else ""
            _exit(f"{where}{e.strerror or e}", 1)
        except MemoryError:
            _exit("out of memory", 1)
        except Terminated:
            print("traceview: terminated", file=sys.stderr)
            raise Exit(SIGTERM_EXIT) from None
        except KeyboardInterrupt:
            print("traceview: interrupted", file=sys.stderr)
            raise Exit(130) from None
        except (Exit, ClickException, Abort):
            raise
        except Exception as e:  # a bug: one line, unless TRACEVIEW_DEBUG asks for the traceback
            if os.environ.get("TRACEVIEW_DEBUG"):
                raise
            from traceview.render.escape import visible  # the message may quote a name

            print(
                f"traceview: internal error (please report it; TRACEVIEW_DEBUG=1 shows the "
                f"traceback): {type(e).__name__}: {visible(str(e))}",
                file=sys.stderr,
            )
            raise Exit(1) from None

    def main(  # type: ignore[override]  # standalone_mode is taken by name only
        self, args: Sequence[str] | None = None, standalone_mode: bool = True, **extra: Any
    ) -> Any:
        if not standalone_mode:
            return super().main(args, standalone_mode=False, **extra)
        typed = list(sys.argv[1:] if args is None else args)
        try:
            code = super().main(typed, standalone_mode=False, **extra)
        except NoArgsIsHelpError as e:  # typer has printed the help already
            sys.exit(e.exit_code)
        except ClickException as e:
            _fail(e, typed)
        except Abort:
            print("traceview: aborted", file=sys.stderr)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


def terminate_as_interrupt() -> None:
    """SIGTERM raises Terminated (a KeyboardInterrupt) in this process, so that a command
    ends as after Ctrl-C, its temp files removed, then exits 143; a process forked from this
    one (a worker) ends by SIGTERM at once, as it would have."""
    parent = os.getpid()

    def terminated(number: int, frame: object) -> None:
        if os.getpid() != parent:
            signal.signal(number, signal.SIG_DFL)
            os.kill(os.getpid(), number)
            return
        raise Terminated

    signal.signal(signal.SIGTERM, terminated)


def _exit(message: str, code: int) -> NoReturn:
    print(f"traceview: error: {TraceviewError(message).message}", file=sys.stderr)
    raise Exit(code) from None


def _fail(e: ClickException, args: list[str]) -> NoReturn:
    """Print ``e`` as one ``traceview: error:`` line and exit (2 for a usage error)."""
    line = TraceviewError(message(e, args)).message  # control characters escaped
    print(f"traceview: error: {line}", file=sys.stderr)
    sys.exit(USAGE_ERROR if isinstance(e, UsageError) else e.exit_code)


def message(e: ClickException, args: Sequence[str]) -> str:
    """The text of a click error, naming the option as the user typed it (``-t`` or ``--top``)."""
    if isinstance(e, NoSuchOption):
        text = _sentence(e.message)
        if e.possibilities:
            text += f"; did you mean {' or '.join(sorted(e.possibilities))}?"
    elif isinstance(e, MissingParameter):
        text = _sentence(e.format_message())
    elif (
        isinstance(e, BadParameter) and e.param is not None and e.param.param_type_name == "option"
    ):
        text = _bad_option(e, args)
    else:
        text = _sentence(e.format_message())
    ctx = getattr(e, "ctx", None)
    if isinstance(e, UsageError) and ctx is not None and not _is_choice(e):  # choices are listed
        text += f" (see {ctx.command_path} -h)"
    return text


def _bad_option(e: BadParameter, args: Sequence[str]) -> str:
    """``--top -1: must be at least 0``; ``--bins 'x': not an integer``."""
    assert e.param is not None
    name = _typed_name(list(e.param.opts) + list(e.param.secondary_opts), args)
    kind, why = e.param.type, e.message.rstrip(".")
    if isinstance(kind, TyperChoice):  # ``--sort 'x': expected one of count, ...``
        value = ast.literal_eval(why.partition(" is not one of ")[0])  # click quotes it
        return expected_one_of(name, value, map(str, kind.choices))
    value, sep, _ = why.partition(" is not in the range ")
    if sep and isinstance(kind, IntRange) and kind.min is not None and kind.max is None:
        return f"{name} {value}: must be at least {kind.min}"
    if isinstance(kind, IntRange) and why.endswith(" is not a valid int range"):
        return f"{name} {why.removesuffix(' is not a valid int range')}: not an integer"
    return f"{name}: {why}"


def _is_choice(e: ClickException) -> bool:
    param = getattr(e, "param", None)
    return param is not None and isinstance(param.type, TyperChoice)


def _typed_name(names: list[str], args: Sequence[str]) -> str:
    """Which of an option's names the user typed last (``-t``, ``--top`` or ``--top=5``)."""
    for arg in reversed(args):
        for name in names:
            long_form = name.startswith("--") and arg.startswith(name + "=")
            short_form = not name.startswith("--") and arg.startswith(name)
            if arg == name or long_form or short_form:
                return name
    return max(names, key=len)


def _sentence(text: str) -> str:
    """Click's ``Missing argument 'trace'.`` as ``missing argument 'trace'``."""
    text = text.rstrip(".").replace(". ", "; ")
    return text[:1].lower() + text[1:]
