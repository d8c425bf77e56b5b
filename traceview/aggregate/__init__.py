"""Stage 3: mergeable statistics over columns (moments, percentiles, interval unions)."""
