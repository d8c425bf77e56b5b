"""Stage 2, columns: decoded events (or an Nsight Systems export's rows) → numpy columns in
exact integer nanoseconds, names interned; the schema of every column is declared once, in
traceview.columns.schema."""
