"""Times and durations as sxctl reads and shows them, offered to the CLI and to your own tooling:
a DURATION (`90`, `250ms`, `1h30m`) to milliseconds, and an instant (milliseconds since the
epoch) as a time in the display zone (`display_zone`: `--tz`, else the local zone; `shown_time`
labels it), a relative time (`in 5m`) or a span (`2h 5m`)."""

from __future__ import annotations

from ..timeparse import (
    display_zone,
    duration_text,
    format_duration_ms,
    format_ms,
    format_relative_ms,
    load_zone,
    local_zone,
    parse_duration_ms,
    shown_time,
    zone_label,
)

__all__ = ["display_zone", "duration_text", "format_duration_ms", "format_ms", "format_relative_ms", "load_zone",
           "local_zone", "parse_duration_ms", "shown_time", "zone_label"]
