"""What traceview mcp needs below the command line: paths confined, answers budgeted."""
