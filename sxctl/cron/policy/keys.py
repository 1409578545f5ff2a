"""The keys of sxctl's policy file that came with format 3 (cron/policy/file.py holds the file): a
job's overlap policy (`--overlap`), the workspace's catch-up budget (`cron defaults
--max-catchup`) and maintenance windows (`cron pause --until`). An sxctl that knows only formats
1 and 2 refuses a file that has any of them (and a job's `--jitter`, `--host` and `--ping-url`,
cron/policy/jitter.py, cron/policy/hosts.py, cron/run/pings.py) (exit 5) rather than drop them on its next write."""

from __future__ import annotations

import unicodedata
from typing import Any

from ..spend.rules import GUARD_KEYS, SPEND_SKIP_REASONS
from ..store.schema import EPOCH_MS
from ..store.schema_kit import Arr, Bool, Check, Int, Node, Obj, SchemaError, Str, opt, req

#: what a due occurrence does while the job's previous message is still unread (`--overlap`)
OVERLAP_MODES = ("queue", "skip", "replace")
#: skip reasons an older sxctl does not know
FORMAT_3_SKIPS = ("overlap", "maintenance", "ran_ahead", *SPEND_SKIP_REASONS)
#: entry keys an older sxctl does not know
FORMAT_3_ENTRY_KEYS = ("overlap", "maintenance", "jitterMs", "host", "pingUrl", "ranAheadMs", *GUARD_KEYS)
#: the workspace's own settings, beside `jobs` (format 3; `budget`: the spend guards, cron/spend/rules.py;
#: `clockRepair`: cron/store/clock_repair.py)
WORKSPACE_KEYS = ("defaults", "maintenance", "budget", "clockRepair", "applied")
#: the records a clock repair acknowledges, and the occurrences it keeps per job, at most (a ledger at
#: comis's largest ceiling, 32 MiB, holds fewer runs)
MAX_RAN_AHEAD = 200_000
#: `cron repair --clock` (cron/store/clock_repair.py): the records made by a clock that ran ahead
CLOCK_REPAIR = Obj([req("atMs", EPOCH_MS), req("throughMs", EPOCH_MS),
                    req("executionIds", Arr(Str(1, 256), max_items=MAX_RAN_AHEAD))])
MAX_CATCHUP = 100_000
#: `cron defaults`: what every pass of the workspace uses unless its own flag says otherwise
DEFAULTS = Obj([opt("maxCatchup", Int(1, MAX_CATCHUP))])
MAX_REASON = 200


def unsafe_text(value: str) -> str | None:
    """Why `value` cannot be a line of text sxctl keeps and shows (None when it can): control
    characters (newline, tab, escape, DEL, C1), line and paragraph separators, lone surrogates."""
    for ch in value:
        if 0xD800 <= ord(ch) <= 0xDFFF:
            return "it is not valid UTF-8 text"
        if unicodedata.category(ch) in ("Cc", "Zl", "Zp"):
            return f"it holds the control character U+{ord(ch):04X}"
    return None


def _window_rule(window: Any) -> str | None:
    if window["untilMs"] <= window["fromMs"]:
        return "a maintenance window must end after it starts"
    return unsafe_text(window["reason"])


#: a maintenance window (`cron pause [NAME | --all] --until TIME --reason TEXT`): occurrences due
#: in it, or found due by a pass in it, are skipped (reason `maintenance`), never caught up
WINDOW = Check(Obj([req("fromMs", EPOCH_MS), req("untilMs", EPOCH_MS), req("reason", Str(1, MAX_REASON))]),
               _window_rule)


class Declared(Node):
    """A declared form as the last `cron apply` left it (schedule_file/declared.py): an object of
    at most 64 keys, each a flag's name, whose values are null, true/false, numbers, strings, or
    objects of these (a workspace's budget or window)."""

    def check(self, value: Any, path: Any, depth: int = 0) -> None:
        if not isinstance(value, dict) or len(value) > 64:
            raise SchemaError(path, "must be an object of at most 64 keys")
        for key, item in value.items():
            if not 1 <= len(key) <= 64:
                raise SchemaError(path, "keys must be 1-64 characters")
            if isinstance(item, dict) and depth == 0:
                self.check(item, (path, f".{key}"), depth + 1)
            elif not (item is None or isinstance(item, (bool, int, float))
                      or (isinstance(item, str) and len(item) <= 4096)):
                raise SchemaError((path, f".{key}"), "must be null, true, false, a number or a string")


class Applied(Node):
    """`applied` (format 4): the last `cron apply` — the schedule file's digest and path, and for
    each job it manages (by id) its name and declared form, its long texts as digests."""

    def __init__(self) -> None:
        self.job = Obj([req("name", Str(1, 1024)), req("declared", Declared()), opt("pruned", Bool()),
                        opt("kept", Bool())])
        self.shape = Obj([req("digest", Str(71, 71)), req("file", Str(1, 4096)), req("jobs", Node()),
                          req("workspace", Declared())])

    def check(self, value: Any, path: Any) -> None:
        self.shape.check(value, path)
        if not isinstance(value["jobs"], dict) or len(value["jobs"]) > 100_000:
            raise SchemaError((path, ".jobs"), "must be an object of at most 100000 jobs")
        for job_id, job in value["jobs"].items():
            self.job.check(job, (path, f".jobs[{job_id!r}]"))


#: entry keys that came with format 4: a run's message lifetime (inbox/lifetimes.py)
FORMAT_4_ENTRY_KEYS = ("expiresMs", "readWithinMs", "pingOn")


def needs_format_4(doc: dict[str, Any]) -> str | None:
    """What in the policy document `doc` needs format 4 (a `cron apply`'s record, a run's message
    lifetime), or None."""
    if "applied" in doc:
        return "the last cron apply"
    return next((f"a job's {key}" for entry in doc["jobs"].values() for key in FORMAT_4_ENTRY_KEYS if key in entry),
                None)


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
            return "a skip for overlap, maintenance or a spend guard"
    return None


def workspace_view(policy: dict[str, Any]) -> dict[str, Any]:
    """The workspace's own settings as `cron list/show --json` show them (`workspacePolicy`), the
    defaults filled in: the catch-up budget of every pass (`maxCatchup`, None: none) and the
    maintenance window of every job (`maintenance`, None: none), the spend guards' budget (`budget`)."""
    return {"maxCatchup": policy.get("defaults", {}).get("maxCatchup"), "maintenance": policy.get("maintenance"),
            "budget": policy.get("budget")}  # the spend guards of every job without its own (`cron budget`)
