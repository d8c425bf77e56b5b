"""``traceview mcp``'s server: the tool table, the MCP server and its worker processes. Only
this package imports the ``mcp`` SDK, and only when ``traceview mcp`` runs."""
