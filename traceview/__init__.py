"""traceview: streaming analysis of huge GPU profiler traces (Chrome trace / PyTorch kineto).

As a library::

    import traceview
    t = traceview.open("trace.json.gz")
    t.kernels(sort="duration-percentage").to_pandas()
    run = traceview.open("run/")          # a run: a directory, a glob or a list of rank files
    run.ranks().to_json()

The names below are imported when first used, so ``import traceview`` (and the CLI's start-up)
stays light.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

# The types of these names are in __init__.pyi: an import here, even for type checkers only,
# would make every module that imports __version__ depend on the whole API.
_LAZY = {
    "open": ("traceview.app.api", "open_trace"),
    "Trace": ("traceview.app.api", "Trace"),
    "Run": ("traceview.app.run_api", "Run"),
    "StepsReport": ("traceview.app.api", "StepsReport"),
    "Tabular": ("traceview.app.api", "Tabular"),
    "TraceviewError": ("traceview.errors", "TraceviewError"),
    "UsageError": ("traceview.errors", "UsageError"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'traceview' has no attribute {name!r}")
    import importlib

    module, attr = _LAZY[name]
    return getattr(importlib.import_module(module), attr)


__all__ = sorted([*_LAZY, "__version__"])  # __init__.pyi lists them for type checkers
