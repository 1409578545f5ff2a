"""The workspace's own settings in a schedule file (`[workspace]`): the catch-up budget, the spend
guards' budget and a maintenance window, each as the policy file keeps it, managed only when the
file names it."""

from __future__ import annotations

from datetime import date, datetime, time
from typing import TYPE_CHECKING, Any

from ...errors import UsageError
from ...timeparse import parse_time_in_zone_ms
from ..policy.keys import MAX_CATCHUP, unsafe_text
from ..spend.rules import GuardOptions, apply_guards

WORKSPACE_KEYS = ("max-catchup", "budget", "maintenance")
BUDGET_KEYS = ("rate-limit-ceiling", "max-session-tokens", "max-tokens-per-day", "on-missing-usage")
WINDOW_KEYS = ("from", "until", "reason")


class WorkspaceTable:
    """`[workspace]` of a schedule file; its reader gives `error` and `unknown` (read.py) and `now_ms`."""

    now_ms: int
    if TYPE_CHECKING:  # given by the reader
        def error(self, table: tuple[str, ...], key: str | None, message: str,
                  hint: str | None = None) -> UsageError: ...

        def unknown(self, table: tuple[str, ...], key: str, known: list[str]) -> UsageError: ...

    def workspace(self, table: Any) -> dict[str, Any]:
        """`[workspace]`: `max-catchup`, `[workspace.budget]`, `[workspace.maintenance]` — each as
        the policy file keeps it (None: cleared); a setting the file leaves out is not managed."""
        where = ("workspace",)
        if not isinstance(table, dict):
            raise self.error(where, None, "must be a table")
        found: dict[str, Any] = {}
        for key, value in table.items():
            if key not in WORKSPACE_KEYS:
                raise self.unknown(where, key, list(WORKSPACE_KEYS))
            if key == "max-catchup":
                if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_CATCHUP:
                    raise self.error(where, key, f"must be a whole number from 0 (no budget) to {MAX_CATCHUP}")
                found[key] = value or None
            elif key == "budget":
                found[key] = self.budget(value)
            else:
                found[key] = self.window(value)
        return found

    def time_text(self, where: tuple[str, ...], key: str, value: Any) -> str:
        """A TIME of the workspace's keys: a string or a TOML date-time."""
        if isinstance(value, (datetime, date, time)):
            return value.isoformat()
        if not isinstance(value, str) or unsafe_text(value) is not None:
            raise self.error(where, key, "must be a TIME string (ISO 8601)")
        return value

    def subtable(self, name: str, table: Any, keys: tuple[str, ...]) -> tuple[str, ...]:
        """`[workspace.NAME]` checked to be a table of known keys; its place, for messages."""
        where = ("workspace", name)
        if not isinstance(table, dict):
            raise self.error(where, None, "must be a table")
        for key in table:
            if key not in keys:
                raise self.unknown(where, key, list(keys))
        return where

    def budget(self, table: Any) -> dict[str, Any] | None:
        where = self.subtable("budget", table, BUDGET_KEYS)
        budget: dict[str, Any] = {}
        try:
            apply_guards(budget, GuardOptions(*(table.get(key) for key in BUDGET_KEYS)))
        except (UsageError, TypeError) as error:
            message = getattr(error, "message", "invalid value")
            key = next((k for k in table if f"--{k}" in message), None)
            raise self.error(where, key, message) from None
        return budget or None

    def window(self, table: Any) -> dict[str, Any] | None:
        where = self.subtable("maintenance", table, WINDOW_KEYS)
        if not table:
            return None
        if "until" not in table or not isinstance(table.get("reason"), str) or not table["reason"]:
            raise self.error(where, None, "a maintenance window needs until = TIME and reason = \"...\"")
        times = {key: self.time_text(where, key, table[key]) for key in ("from", "until") if key in table}
        try:
            window = {key: parse_time_in_zone_ms(text, "UTC", self.now_ms) for key, text in times.items()}
        except UsageError as error:
            raise self.error(where, None, error.message) from None
        reason = table["reason"]
        if (why := unsafe_text(reason)) is not None or len(reason) > 200:
            raise self.error(where, "reason", why or "at most 200 characters")
        if window["until"] <= self.now_ms:
            return None  # a window that has ended is none: a file kept after it must not break
        if window.get("from") is not None and window["until"] <= window["from"]:
            raise self.error(where, "until", "a maintenance window must end after it starts")
        return {"fromMs": window.get("from"), "untilMs": window["until"], "reason": reason}
