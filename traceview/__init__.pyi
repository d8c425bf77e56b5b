from traceview.app.api import StepsReport as StepsReport
from traceview.app.api import Tabular as Tabular
from traceview.app.api import Trace as Trace
from traceview.app.api import open_trace as open
from traceview.errors import TraceviewError as TraceviewError
from traceview.errors import UsageError as UsageError

__version__: str
__all__ = ["StepsReport", "Tabular", "Trace", "TraceviewError", "UsageError", "__version__", "open"]
