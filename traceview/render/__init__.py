"""Stage 5: render one analysis result as a terminal table, text, JSON, CSV or Markdown."""
