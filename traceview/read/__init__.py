"""Stage 1: bytes → decoded trace events, streamed in batches."""
