"""The policy file's record of the last `cron apply` (`applied`, format 4): what it keeps of each
job it manages and of the workspace's settings, read by the plan (plan.py) and by drift
(drift.py) alike."""

from __future__ import annotations

import hashlib
from typing import Any

from .declared import KEPT, KEYS

#: keys whose values the applied record keeps as digests (a prompt, a script)
LONG_KEYS = ("text", "wake-gate-script")


def applied_of(policy: dict[str, Any]) -> dict[str, Any]:
    """The policy file's record of the last apply (an empty one when there was none)."""
    applied: dict[str, Any] = policy.get("applied") or {"digest": "", "file": "", "jobs": {}, "workspace": {}}
    return applied


def fingerprint(declared: dict[str, Any]) -> dict[str, Any]:
    """A declared form as the applied record keeps it: a prompt or script by its digest."""
    return {key: (f"sha256:{hashlib.sha256(value.encode('utf-8', 'surrogatepass')).hexdigest()}"
                  if key in LONG_KEYS and isinstance(value, str) else value)
            for key, value in declared.items() if key in KEYS}


def recorded(in_file: dict[str, Any], made: dict[str, Any]) -> dict[str, Any]:
    """The applied record of a job the file declares (`in_file`) as the apply made it (`made`):
    what the file declares — not the keys it leaves as the job has them (drift is about the file),
    nor the ping URL, which comes from each host's environment."""
    kept = {*in_file.get(KEPT, ()), "ping-url"}
    return {key: value for key, value in fingerprint(made).items() if key not in kept}


def workspace_setting(policy: dict[str, Any], key: str) -> Any:
    """A workspace setting of the policy file by its schedule file key (None: not set)."""
    if key == "max-catchup":
        return policy.get("defaults", {}).get("maxCatchup")
    return policy.get(key) or None


def same_setting(key: str, now: Any, declared: Any) -> bool:
    """A workspace setting as declared: a window declared without `from` matches the open one."""
    if key == "maintenance" and now is not None and declared is not None and declared["fromMs"] is None:
        return (now["untilMs"], now["reason"]) == (declared["untilMs"], declared["reason"])
    return bool(now == declared)
