"""`cron dump`: today's jobs as a schedule file — each job's declared form (schedule_file/declared.py)
with the keys that differ from their defaults, in TOML that `cron apply` reads back into the same
jobs (no byte of the store changes). A ping URL is a secret: the file names an environment
variable for it instead. Jobs a file cannot declare are left out, and said."""

from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path
from typing import Any

from ...timeparse import duration_text
from .declared import KEYS, declared_of, default_of, instant_text, wall_text
from .read import name_rule

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_ESCAPES = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r", '"': '\\"', "\\": "\\\\"}


def toml_string(text: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped, and the characters
    that can disguise a line in a review (C1 controls, bidi overrides, line separators) too."""
    return '"' + "".join(_ESCAPES.get(ch) or (f"\\u{ord(ch):04X}" if _hidden(ch) else ch) for ch in text) + '"'


def _hidden(ch: str) -> bool:
    """A character TOML must escape (C0, DEL) or a reader would not see (Cc, Cf, Zl, Zp); a lone
    surrogate cannot be written at all (the job is left out: `declarable_name`)."""
    return ord(ch) < 0x20 or unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp")


def toml_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else toml_string(key)


def toml_value(key: str, value: Any, base: Path, workspace: Path) -> str:
    """A declared value as the file writes it (what schedule_file/read.py reads back the same)."""
    kind = KEYS[key]
    if kind == "bool":
        return "true" if value else "false"
    if kind in ("int", "fraction"):
        return repr(value)
    if kind == "duration":
        return toml_string(duration_text(value))
    if kind == "time":
        return toml_string(instant_text(value))
    if kind == "path":  # a project in the workspace relative to the file (both move together), else absolute
        return toml_string(value if os.path.isabs(value) else os.path.relpath(os.path.join(workspace, value), base))
    return toml_string(str(value))


def ping_variable(name: str, taken: set[str]) -> str:
    """The environment variable a dumped job's ping URL is named by: PING_URL_<NAME>."""
    stem = "PING_URL_" + (re.sub(r"[^A-Z0-9]+", "_", name.upper()).strip("_") or "JOB")
    variable, number = stem, 2
    while variable in taken:
        variable, number = f"{stem}_{number}", number + 1
    taken.add(variable)
    return variable


def dump_text(store: dict[str, Any], policy: dict[str, Any], workspace: Path, *, base: Path,
              header: str) -> tuple[str, list[str], dict[str, str]]:
    """(the schedule file, the jobs left out and why, the ping URL of each environment variable it
    names). `base`: the folder the file will be in (target projects are written relative to it)."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    left_out: list[str] = []
    pings: dict[str, str] = {}
    workspace_lines = _workspace_lines(policy)
    if workspace_lines:
        lines += ["", *workspace_lines]
    for record in store["jobs"]:
        declared = declared_of(record, policy["jobs"].get(record["id"], {}), workspace)
        if declared is None:
            left_out.append(f"{record['name']}: a schedule file cannot declare it (a built-in job, or a target or "
                            "setting `cron add` cannot make)")
            continue
        if name_rule(record["name"]) is not None or any(0xD800 <= ord(ch) <= 0xDFFF for ch in
                                                        "".join(v for v in declared.values() if isinstance(v, str))):
            left_out.append(f"{record['name']!r}: its name or a value holds a character a schedule file refuses "
                            "(rename it with `cron update NAME --name NEW`)")
            continue
        body = []
        for key in KEYS:
            value = declared[key]
            if value is None or value == default_of(key, declared["payload"]) or (key == "paused" and not value):
                continue
            if key in ("at", "anchor") and declared["tz"] != "UTC":  # a wall time in the job's zone
                text, fold = wall_text(value, declared["tz"])
                body += [f"{key} = {toml_string(text)}", *([f"fold = {toml_string(fold)}"] if fold else [])]
            elif key == "ping-url":
                variable = ping_variable(record["name"], set(pings))
                pings[variable] = value
                body.append(f"ping-url-env = {toml_string(variable)}")
            else:
                body.append(f"{key} = {toml_value(key, value, base, workspace)}")
        lines += ["", f"[jobs.{toml_key(record['name'])}]", *body]
    return "\n".join(lines) + "\n", left_out, pings


def _workspace_lines(policy: dict[str, Any]) -> list[str]:
    """`[workspace]`: the catch-up budget, the spend guards' budget and an open maintenance window."""
    found: list[str] = []
    catchup = policy.get("defaults", {}).get("maxCatchup")
    budget = policy.get("budget")
    window = policy.get("maintenance")
    if catchup is None and not budget and not window:
        return found
    if catchup is not None:
        found += ["[workspace]", f"max-catchup = {catchup}"]
    if budget:
        names = {"rateLimitCeiling": "rate-limit-ceiling", "maxSessionTokens": "max-session-tokens",
                 "maxTokensPerDay": "max-tokens-per-day", "onMissingUsage": "on-missing-usage"}
        found += [*([""] if found else []), "[workspace.budget]"]
        found += [f"{names[key]} = {toml_string(value) if isinstance(value, str) else repr(value)}"
                  for key, value in budget.items()]
    if window:
        found += [*([""] if found else []), "[workspace.maintenance]",
                  f"from = {toml_string(instant_text(window['fromMs']))}",
                  f"until = {toml_string(instant_text(window['untilMs']))}",
                  f"reason = {toml_string(window['reason'])}"]
    return found
