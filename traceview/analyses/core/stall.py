"""The least host stall, and the shortest python frame that can hold half of one: constants
only, read by the command line before its analyses are imported (the early read of
``summary``)."""

STALL_MIN_NS = 1_000_000  # a host stall holds at least 1 ms of uncovered host wait
# The host-stall hint names a frame holding at least half of a stall (analyses.core.stacks
# covering_frame): a shorter frame holds half of none, so ``summary`` keeps only the others.
STALL_FRAME_MIN_NS = STALL_MIN_NS // 2
