"""Where the ranks of a run are read: a local process pool, or a Dask cluster."""
