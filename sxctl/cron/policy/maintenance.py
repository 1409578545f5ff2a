"""Maintenance windows (`cron pause --all --until TIME --reason TEXT`, or one job's `cron pause
NAME --until …`), kept in sxctl's policy file (format 3): the workspace's window applies to every
job, a job's own to it. An occurrence due inside a window, or found due by a pass inside one, is
skipped (reason `maintenance`) and never caught up — a recurring job's next run is its first
occurrence after the window; a one-shot waits and runs once the window is over. Nothing is
paused in comis's store, so the jobs resume by themselves when the window ends; `cron resume
--all` (or `cron resume NAME`) ends a window early."""

from __future__ import annotations

import re
import shlex
from typing import Any

from ...errors import UsageError
from ...timeparse import LATEST_SCHEDULABLE_MS, format_ms, parse_duration_ms, parse_local_time_ms, shown_time
from .keys import MAX_REASON, unsafe_text


def windows_for(policy: dict[str, Any], job_id: str) -> tuple[dict[str, Any], ...]:
    """The windows that apply to a job: the workspace's and its own."""
    return tuple(w for w in (policy.get("maintenance"), policy["jobs"].get(job_id, {}).get("maintenance")) if w)


def window_at(windows: tuple[dict[str, Any], ...], due_at: int, now: int) -> dict[str, Any] | None:
    """The window that skips the occurrence due at `due_at` in a pass at `now`, if any."""
    for window in windows:
        if window["fromMs"] <= due_at < window["untilMs"] or window["fromMs"] <= now < window["untilMs"]:
            return window
    return None


def prune_windows(policy: dict[str, Any], store: dict[str, Any], now: int) -> bool:
    """Drop the windows that are over and hold back no occurrence any more — no recurring job
    they apply to is still due inside them (a pass calls this after admitting its jobs, which
    skipped those occurrences); True when any was dropped."""
    def settled(window: dict[str, Any], jobs: list[dict[str, Any]]) -> bool:
        end = window["untilMs"]
        return end <= now and all(job["schedule"]["kind"] == "at" or job["lifecycle"].get("nextRunAtMs", end) >= end
                                  for job in jobs)

    dropped = False
    if policy.get("maintenance") and settled(policy["maintenance"], store["jobs"]):
        del policy["maintenance"]
        dropped = True
    for job in store["jobs"]:
        entry = policy["jobs"].get(job["id"], {})
        if entry.get("maintenance") and settled(entry["maintenance"], [job]):
            del entry["maintenance"]
            dropped = True
    return dropped


def window_text(window: dict[str, Any]) -> str:
    """A window in words: `maintenance until 2026-12-01 14:00 UTC: db migration` (in the display zone)."""
    return f"maintenance until {shown_time(window['untilMs'], None, '%Y-%m-%d %H:%M')}: {window['reason']}"


def new_window(until: str, reason: str | None, now: int) -> dict[str, Any]:
    """The window `--until TIME --reason TEXT` opens now (exit 2 naming a bad value); a TIME
    without an offset is read in this machine's zone."""
    try:
        if re.fullmatch(r"(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+", until.strip()):  # `2h`: for two hours from now
            until_ms = now + parse_duration_ms(until, what="--until")
        else:
            until_ms = parse_local_time_ms(until, None)
    except UsageError as error:
        raise UsageError(f"invalid --until {until!r}: {error.message}") from None
    if until_ms <= now:
        raise UsageError(f"--until {until} is not in the future")
    if until_ms >= LATEST_SCHEDULABLE_MS:  # the store's field would not hold it
        raise UsageError(f"--until {until} is too far in the future (the latest is {format_ms(LATEST_SCHEDULABLE_MS)})")
    if not reason or not reason.strip():
        raise UsageError("a maintenance window needs --reason TEXT (status and doctor show it)")
    why = unsafe_text(reason)
    if why is not None or len(reason) > MAX_REASON:
        shown = reason.encode("unicode_escape", "backslashreplace").decode("ascii")
        raise UsageError(f"invalid --reason '{shown[:MAX_REASON]}': {why or f'longer than {MAX_REASON} characters'}")
    return {"fromMs": now, "untilMs": until_ms, "reason": reason}


def open_windows(policy: dict[str, Any], store: dict[str, Any], now: int) -> list[dict[str, Any]]:
    """The windows open now, for `status` and `doctor`: `{scope, jobId, name, fromMs, untilMs,
    reason}` (`scope` `all` or `job`), the workspace's first. One that starts later (written by a
    clock ahead of this one) skips nothing yet, as the pass judges it (`window_at`)."""
    def is_open(window: dict[str, Any] | None) -> bool:
        return bool(window) and window["fromMs"] <= now < window["untilMs"]  # type: ignore[index]

    found = []
    if is_open(policy.get("maintenance")):
        found.append({"scope": "all", "jobId": None, "name": None, **policy["maintenance"]})
    for job in store["jobs"]:
        window = policy["jobs"].get(job["id"], {}).get("maintenance")
        if is_open(window):
            found.append({"scope": "job", "jobId": job["id"], "name": job["name"], **window})
    return found


def resume_command(window: dict[str, Any]) -> str:
    """The command that ends a window now (`open_windows` row)."""
    if window["scope"] == "all":
        return "sxctl cron resume --all"
    name = shlex.quote(window["name"])
    return f"sxctl cron resume {'-- ' if name.startswith('-') else ''}{name}"


def maintenance_message(window: dict[str, Any]) -> str:
    """An open window in words, for `status` and `doctor` (`open_windows` row)."""
    who = "every cron job" if window["scope"] == "all" else f"cron job {window['name']}"
    return (f"{who}: {window_text(window)}; its occurrences until then are skipped, not caught up "
            f"(`{resume_command(window)}` ends it now)")
