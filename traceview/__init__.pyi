from pathlib import Path
from typing import Any, overload

from traceview.app.api import StepsReport as StepsReport
from traceview.app.api import Tabular as Tabular
from traceview.app.api import Trace as Trace
from traceview.app.run_api import Run as Run
from traceview.errors import TraceviewError as TraceviewError
from traceview.errors import UsageError as UsageError

__version__: str
__all__ = [
    "Run",
    "StepsReport",
    "Tabular",
    "Trace",
    "TraceviewError",
    "UsageError",
    "__version__",
    "open",
]

@overload
def open(
    path: list[str | Path] | list[str] | list[Path] | tuple[str | Path, ...], **options: Any
) -> Run: ...
@overload
def open(path: str | Path, **options: Any) -> Trace | Run: ...
