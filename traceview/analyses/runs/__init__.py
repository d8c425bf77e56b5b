"""Runs of several ranks: rank summaries, their mergeable roll-up, and the answers over a run."""
