"""The hidden `--fault-inject POINT` test hook: die with status 99 at a named point.

Tests use it to kill a writer at exactly the moments that matter (reference-agent.md §8).
"""

from __future__ import annotations

import os

#: the spec's points, plus `after-sidecar` (an inbox image published, its message not yet) and
#: `after-move` (`inbox forward`: a message renamed into the target, the source not yet tidied;
#: `callbacks move`: the timers added to the target's table, not yet cancelled at the source) and
#: `sidecar-linked` (`inbox forward`: an image linked under its temp name, not yet renamed) and
#: `before-spend-history` (a pass: the spend file replaced, the runs it closed not yet appended to
#: the spend history).
POINTS = (
    "before-rename",
    "after-sidecar",
    "sidecar-linked",
    "after-move",
    "after-claim",
    "after-start",
    "after-dispatch",
    "after-terminal",
    "after-lifetime",
    "before-withdraw",
    "before-spend-history",
)

FAULT_EXIT_STATUS = 99

_armed: str | None = None


def arm(point: str | None) -> None:
    global _armed
    if point is not None and point not in POINTS:
        raise ValueError(f"unknown fault point {point!r}")
    _armed = point


def hit(point: str) -> None:
    """Exit at once, without clean-up, when `point` is the armed one."""
    if _armed == point:
        os._exit(FAULT_EXIT_STATUS)
