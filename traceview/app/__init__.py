"""Stage 6: one function per command (check, read, analyse, render, write), runs of ranks,
output files, and the one place for memory policy between stages."""
