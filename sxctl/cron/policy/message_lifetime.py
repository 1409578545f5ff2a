"""A job's settings for each run's message (inbox/lifetimes.py): `--expires`, `--read-within` and
`--ping-on`, checked and put into its entry of sxctl's policy file (cron/policy/file.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...errors import UsageError
from ...inbox.message import MAX_LIFETIME_MS


def apply_lifetime(entry: dict[str, Any], expires: float | None, read_within: float | None, ping_on: str | None,
                   ms: Callable[[str, float], int]) -> None:
    """Change `entry` by the flags given (seconds; 0 clears); exit 2 naming the flag."""
    for flag, key, seconds in (("--expires", "expiresMs", expires), ("--read-within", "readWithinMs", read_within)):
        if seconds is not None:
            if seconds < 0 or seconds * 1000 > MAX_LIFETIME_MS or (seconds and not ms(flag, seconds)):
                raise UsageError(f"{flag} must be 0 (none), or 1ms to {MAX_LIFETIME_MS // 86_400_000} days")
            if ms(flag, seconds):
                entry[key] = ms(flag, seconds)
            else:
                entry.pop(key, None)
    if ping_on is not None:
        if ping_on not in ("written", "read"):
            raise UsageError(f"invalid --ping-on {ping_on!r}: written or read")
        if ping_on == "read":
            entry["pingOn"] = "read"
        else:
            entry.pop("pingOn", None)
    if "expiresMs" in entry and entry.get("readWithinMs", 0) >= entry["expiresMs"]:
        raise UsageError("--read-within must be shorter than --expires: the message is withdrawn before it could be "
                         "late")
    if entry.get("pingOn") == "read" and "pingUrl" not in entry:
        raise UsageError("--ping-on read needs --ping-url URL (the monitor it tells)")


def check_lifetime_payload(job: dict[str, Any], entry: dict[str, Any]) -> None:
    """--expires, --read-within and --ping-on read are about a run's inbox message: a delivery job
    sends none (exit 2, rather than settings that do nothing)."""
    if job["payload"]["kind"] == "delivery" and any(key in entry for key in ("expiresMs", "readWithinMs", "pingOn")):
        raise UsageError("--expires, --read-within and --ping-on read are for jobs that send an inbox message "
                         "(agent-turn, heartbeat-event): a delivery job sends none")
