"""Click's own usage errors (unknown option, missing argument, --top -1) as one line.

Typer prints them as a boxed panel under the usage text; traceview says every usage error the
same way: ``traceview: error: ...`` on stderr, exit 2.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, NoReturn

# typer vendors click; its exceptions are not re-exported (only BadParameter is).
from typer import Abort
from typer._click.exceptions import (
    BadParameter,
    ClickException,
    MissingParameter,
    NoArgsIsHelpError,
    NoSuchOption,
    UsageError,
)
from typer._click.types import IntRange
from typer.core import TyperGroup

from traceview.errors import USAGE_ERROR, TraceviewError


class OneLineErrors(TyperGroup):
    """The root group: parses and runs as typer does, but reports click's errors in one line."""

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
    if isinstance(e, UsageError) and ctx is not None:
        text += f" (see {ctx.command_path} -h)"
    return text


def _bad_option(e: BadParameter, args: Sequence[str]) -> str:
    """``--top -1: must be at least 0``; ``--bins 'x': not an integer``."""
    assert e.param is not None
    name = _typed_name(list(e.param.opts) + list(e.param.secondary_opts), args)
    kind, why = e.param.type, e.message.rstrip(".")
    value, sep, _ = why.partition(" is not in the range ")
    if sep and isinstance(kind, IntRange) and kind.min is not None and kind.max is None:
        return f"{name} {value}: must be at least {kind.min}"
    if isinstance(kind, IntRange) and why.endswith(" is not a valid int range"):
        return f"{name} {why.removesuffix(' is not a valid int range')}: not an integer"
    return f"{name}: {why}"


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
