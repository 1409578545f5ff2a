"""Python's cycle collector paused while a command builds large acyclic data. A 10,000-job store
parses to ~500,000 objects, and the collector scans every tracked object each time their number
grows by a quarter: at 10,000 jobs that was an eighth of `cron list`'s time, looking for cycles
that JSON read from a file cannot hold (Mercurial pauses it alike: `util.nogc`). Scoped, not
process-wide: `watch`, `agent run` and rehearsals run for hours and must collect."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cycle collection inside (nested: only the outermost resumes it)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
