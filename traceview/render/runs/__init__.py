"""Renderers of the answers over a run of several ranks."""
