"""The keys of sxctl's policy file that came with format 3 (cron/policy.py holds the file): a
job's overlap policy (`--overlap`), the workspace's catch-up budget (`cron defaults
--max-catchup`) and maintenance windows (`cron pause --until`). An sxctl that knows only formats
1 and 2 refuses a file that has any of them (exit 5) rather than drop them on its next write."""

from __future__ import annotations

from typing import Any

from .schema_kit import Int, Obj, opt

#: what a due occurrence does while the job's previous message is still unread (`--overlap`)
OVERLAP_MODES = ("queue", "skip", "replace")
#: skip reasons an older sxctl does not know
FORMAT_3_SKIPS = ("overlap", "maintenance")
#: entry keys an older sxctl does not know
FORMAT_3_ENTRY_KEYS = ("overlap",)
#: the workspace's own settings, beside `jobs` (format 3)
WORKSPACE_KEYS = ("defaults",)
MAX_CATCHUP = 100_000
#: `cron defaults`: what every pass of the workspace uses unless its own flag says otherwise
DEFAULTS = Obj([opt("maxCatchup", Int(1, MAX_CATCHUP))])


def needs_format_3(doc: dict[str, Any]) -> str | None:
    """What in the policy document `doc` needs format 3 (in words), or None."""
    for key in WORKSPACE_KEYS:
        if key in doc:
            return f"the workspace's {key}"
    for entry in doc["jobs"].values():
        for key in FORMAT_3_ENTRY_KEYS:
            if key in entry:
                return f"a job's {key}"
        if any(skip["reason"] in FORMAT_3_SKIPS for skip in entry.get("skips", {}).get("recent", [])):
            return "a skip for overlap or maintenance"
    return None


def workspace_view(policy: dict[str, Any]) -> dict[str, Any]:
    """The workspace's own settings as `cron list/show --json` show them (`workspacePolicy`), the
    defaults filled in: the catch-up budget of every pass (`maxCatchup`, None: none)."""
    return {"maxCatchup": policy.get("defaults", {}).get("maxCatchup")}
