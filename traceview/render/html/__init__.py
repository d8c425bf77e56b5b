"""``traceview report``: one self-contained HTML page with plots (see README "HTML report")."""
