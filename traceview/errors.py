"""One error type that carries its exit code (0 ok, 1 bad input or failed check, 2 usage)."""

from __future__ import annotations

DATA_ERROR = 1
USAGE_ERROR = 2


class TraceviewError(Exception):
    """An error the user can act on: printed as one line, never as a traceback."""

    def __init__(self, message: str, exit_code: int = DATA_ERROR) -> None:
        message = _one_line(message)
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class UsageError(TraceviewError):
    """A bad option value or combination (exit code 2)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, USAGE_ERROR)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C would be (``cli.errors.terminate_as_interrupt``): every
    clean-up that Ctrl-C runs (temp files, half-written outputs, workers) runs for it too."""


def _one_line(text: str) -> str:
    """Control characters (from names or keys quoted in a message) shown escaped."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
