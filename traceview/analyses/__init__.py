"""Stage 4: analyses over TraceEvents, each returning one frozen result object."""
