"""How an analysis puts part of its work on a second core without knowing how: an Aside
starts ``work()`` elsewhere and gives a Later of its value (traceview.forked.Aside, chosen by
traceview.app.aside; its value is what ``work()`` gives here, whatever happens there)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class Later(Protocol[T_co]):
    """A value being worked out elsewhere (traceview.forked.Aside)."""

    def result(self) -> T_co: ...

    def cancel(self) -> None: ...


class Aside(Protocol):
    """Starts ``work()`` elsewhere (a second core) and gives its Later; ``kind``: the type of
    its value. The value must be what ``work()`` gives here (Aside falls back to that)."""

    def __call__(self, work: Callable[[], T], kind: type[T]) -> Later[T]: ...
