"""The operator view (``traceview ops``): op links grouped, FLOPs, bytes, peaks and the roofline."""
