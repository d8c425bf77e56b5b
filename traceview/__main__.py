"""``python -m traceview``."""

from traceview.cli import main

main()
