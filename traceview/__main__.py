"""``python -m traceview``."""

from traceview.cli import main

if __name__ == "__main__":  # spawned worker processes (Dask) import this module again
    main()
