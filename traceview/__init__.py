"""traceview: streaming analysis of huge GPU profiler traces (Chrome trace / PyTorch kineto)."""

__version__ = "0.1.0"
