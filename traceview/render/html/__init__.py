"""``traceview report``: one self-contained HTML page with plots (see docs/report.md)."""
