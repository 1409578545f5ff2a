"""The project's state for the monitoring people already run: the Prometheus text exposition
format, version 0.0.4 (`sxctl metrics`, `cron tick --metrics-file`). No rule is made here: every
number is read from the `status` document (jobs by state, pending, stranded, overdue, waiting,
limits hit, liveness: the rules `status` and `doctor` ask), from the ledger's runs projection
with each run's receipt (`cron.run.receipts.run_consumption`, as `cron runs` shows it), and from the
heartbeat the last pass left. Read-only but for `write_metrics_file`, the textfile's one writer."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..clock import CLOCK_SKEW_MS, Clock
from ..cron.policy.file import PAUSE_REASONS
from ..cron.run.heartbeat import OUTCOMES, read_heartbeats, written_elsewhere
from ..cron.run.ledger import project_run, scan_ledger
from ..cron.run.receipts import run_consumption
from ..cron.store.file import read_store
from ..errors import InvalidDataError, SystemRefusedError
from ..record import Factory, record
from .summary import CRON_FILES

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: a run's receipt as a label: the message was read, is still unread, was taken back, is lost,
#: or the run dispatched no inbox message (`none`)
RECEIPT_LABELS = {"read": "read", "pending": "unread", "retracted": "retracted", "expired": "expired", "lost": "lost"}
#: the files whose trouble is a metric of its own (the cron part of `status` names the first three)


@record
class Family:
    """One metric: its name, help text and samples (labels, value); every metric here is a gauge."""

    name: str
    help: str
    samples: list[tuple[dict[str, str], float]] = Factory(list)  # type: ignore[assignment]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "type": "gauge", "help": self.help,
                "samples": [{"labels": labels, "value": value} for labels, value in self.samples]}


def label_value(text: str) -> str:
    """A label value as the format writes it: `\\`, `"` and a line break escaped (its only three
    escapes); any other character that is not printable (a control, a bidi override, a lone
    surrogate) becomes U+FFFD, so that the text stays UTF-8, no parser meets an escape it does
    not know and no terminal a control it would obey."""
    text = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() and not 0xD800 <= ord(c) <= 0xDFFF else "\ufffd" for c in text)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def exposition(families: list[Family]) -> str:
    """The text format: a HELP and a TYPE line per metric, then its samples, one per line."""
    lines = []
    for family in families:
        lines += [f"# HELP {family.name} {family.help}", f"# TYPE {family.name} gauge"]
        for labels, value in family.samples:
            inner = ",".join(f'{key}="{label_value(str(text))}"' for key, text in labels.items())
            lines.append(f"{family.name}{{{inner}}} {_number(value)}")
    return "\n".join(lines) + "\n"


def collect(doc: dict[str, Any], ws, project: Path, clock: Clock, max_log_bytes: int) -> list[Family]:
    """The metrics of a `status` document `doc` (of workspace `ws`, whose jobs without a target
    send to `project`), the ledger's runs and the heartbeat. Every sample carries the workspace,
    so that the files of several projects can sit in one textfile folder."""
    base = {"workspace": os.path.realpath(ws.root)}
    families: list[Family] = []

    def gauge(name: str, help_text: str, *samples: tuple[dict[str, str], float]) -> None:
        families.append(Family(name, help_text, [({**base, **labels}, value) for labels, value in samples]))

    live, inbox, cron = doc["liveness"], doc["inbox"] or {}, doc["cron"]
    gauge("sxctl_agent_live", "1 when the agent of the session is live (its stats.json is fresh), else 0.",
          ({}, 1 if live["state"] == "live" else 0))
    gauge("sxctl_agent_stats_age_seconds", "Age of the agent's stats.json (no sample: no stats.json).",
          *([({}, live["stats_age_ms"] / 1000)] if live["stats_age_ms"] is not None else []))
    gauge("sxctl_inbox_pending_messages", "Messages waiting in the session's inbox.",
          *([({}, inbox["pending"])] if "pending" in inbox else []))
    gauge("sxctl_inbox_oldest_pending_age_seconds", "Age of the oldest pending message (no sample: none pending).",
          *([({}, inbox["oldest_pending_age_ms"] / 1000)] if inbox.get("oldest_pending_age_ms") is not None else []))
    ends = inbox.get("lifetimes")  # messages with --expires / --read-within (inbox/lifetimes.py)
    if ends is not None:
        gauge("sxctl_inbox_unread_past_deadline_messages", "Pending messages not read within their --read-within.",
              ({}, len(ends["overdue"])))
        gauge("sxctl_inbox_expired_pending_messages", "Pending messages whose --expires passed, not yet withdrawn "
              "(no pass or `sxctl inbox expire` ran since).", ({}, len(ends["expiredPending"])))
        gauge("sxctl_inbox_expired_messages", "Messages withdrawn unread when their --expires passed (kept ones).",
              ({}, ends["expired"]))
        gauge("sxctl_inbox_read_late_messages", "Messages read after their --read-within (kept ones).",
              ({}, ends["readLate"]))
    stranded = doc["stranded"]
    gauge("sxctl_stranded_sessions", "Sessions no agent reads that hold pending messages or active timers.",
          ({}, len(stranded)))
    gauge("sxctl_stranded_messages", "Pending messages in sessions no agent reads (`sxctl inbox forward`).",
          ({}, sum(entry["pending"] for entry in stranded)))
    gauge("sxctl_stranded_timers", "Active timers in sessions no agent reads (`sxctl callbacks move`).",
          ({}, sum(entry["timers"] for entry in stranded)))
    _cron_families(gauge, cron)
    _spend_families(gauge, doc.get("usage") or {}, cron.get("guards", []))
    _run_families(gauge, cron, ws, project, clock, max_log_bytes)
    _heartbeat_families(gauge, cron, ws, clock.now_ms())
    codes: dict[str, int] = {}
    for problem in doc["problems"]:
        codes[problem["code"]] = codes.get(problem["code"], 0) + 1
    gauge("sxctl_status_problems", "Problems `sxctl status` reports, by code.",
          *[({"code": code}, count) for code, count in sorted(codes.items())])
    return families


def _cron_families(gauge, cron: dict[str, Any]) -> None:
    gauge("sxctl_cron_jobs", "Cron jobs by state, as `sxctl cron list` shows it.",
          *[({"state": state}, count) for state, count in sorted(cron.get("jobs_by_state", {}).items())])
    overdue = cron.get("overdue", [])
    gauge("sxctl_cron_overdue_jobs", "Jobs past their due time by more than the grace, not waiting for the agent.",
          ({}, len(overdue)))
    gauge("sxctl_cron_job_overdue", "1 for each overdue job.", *[({"job": name}, 1) for name in overdue])
    gauge("sxctl_cron_waiting_jobs", "Due jobs the pass holds until an agent is live (--hold-max).",
          ({}, len(cron.get("waiting", []))))
    gauge("sxctl_cron_failed_jobs", "Jobs whose last run did not succeed.", ({}, len(cron.get("failed", []))))
    paused = cron.get("paused_by_sxctl", [])
    gauge("sxctl_cron_limits_hit", "Jobs sxctl paused because a limit was hit (max_unconsumed) or they expired.",
          *[({"reason": reason}, sum(1 for p in paused if p["reason"] == reason)) for reason in PAUSE_REASONS])
    gauge("sxctl_cron_job_limit_hit", "1 for each job paused by a limit, with the limit.",
          *[({"job": p["name"], "reason": p["reason"]}, 1) for p in paused])
    gauge("sxctl_cron_active_claims", "Runs claimed and not settled yet.",
          *([({}, cron["active_claims"])] if "active_claims" in cron else []))


#: an agent that writes no usage block at all (not every agent does) is not a problem to count
ABSENT = ("no readable stats.json", "stats.json has no usage block")


def _spend_families(gauge, usage: dict[str, Any], guards: list[dict[str, Any]]) -> None:
    """The agent's own usage figures (no sample: unreadable) and what the spend guards hold."""
    gauge("sxctl_agent_usage_tokens", "The session's usage.total_tokens, from the agent's stats.json.",
          *([({}, usage["total_tokens"])] if usage.get("total_tokens") is not None else []))
    gauge("sxctl_agent_rate_limit_ratio", "The provider's rate-limit use the agent reports (rl_5h, rl_7d), 0-1.",
          *[({"window": window}, usage[f"rl_{window}"]) for window in ("5h", "7d")
            if usage.get(f"rl_{window}") is not None])
    gauge("sxctl_agent_usage_unreadable", "1 for each usage figure the agent wrote that cannot be read.",
          *[({"figure": name}, 1) for name, why in sorted((usage.get("unreadable") or {}).items())
            if why not in ABSENT])
    gauge("sxctl_cron_guard_held_jobs", "Due jobs a spend guard holds, by its reason.",
          *[({"reason": reason}, sum(1 for row in guards if row["held"] and row["reason"] == reason))
            for reason in ("rate_limit", "token_budget", "usage_unreadable")])
    gauge("sxctl_cron_job_tokens_today", "Tokens attributed to a job's runs today (--max-tokens-per-day jobs).",
          *[({"job": row["name"]}, row["tokensToday"]) for row in guards if row["tokensToday"] is not None])


def _run_families(gauge, cron: dict[str, Any], ws, project: Path, clock: Clock, max_log_bytes: int) -> None:
    """The runs of the whole ledger by status and receipt (what `cron runs --exact` lists)."""
    runs = _runs(ws, project, clock, max_log_bytes) if cron.get("store_exists") else None
    invalid = ({CRON_FILES.get(os.path.basename(cron.get("invalid_file") or ""), "store")} if "invalid" in cron
               else set())
    if runs is None and cron.get("store_exists"):
        invalid.add("ledger")
    counts: dict[tuple[str, str], int] = {}
    for status, receipt in runs or []:
        counts[status, receipt] = counts.get((status, receipt), 0) + 1
    gauge("sxctl_cron_runs", "Runs in the ledger by status and receipt (read, unread, retracted, expired, lost, none).",
          *[({"status": status, "receipt": receipt}, n) for (status, receipt), n in sorted(counts.items())])
    gauge("sxctl_cron_unread_runs", "Runs whose inbox message the agent has not read yet.",
          ({}, sum(n for (_, receipt), n in counts.items() if receipt == "unread")))
    gauge("sxctl_cron_file_invalid", "1 when the cron file cannot be read or is invalid (every pass stops on it).",
          *[({"file": name}, 1 if name in invalid else 0) for name in ("store", "policy", "ledger", "spend")])


def _runs(ws, project: Path, clock: Clock, max_log_bytes: int) -> list[tuple[str, str]] | None:
    """(status, receipt) of every run of the ledger; None when a file cannot be read."""
    try:
        store = read_store(ws)
        ledger = scan_ledger(ws.ledger, max_log_bytes=max_log_bytes)
    except (InvalidDataError, SystemRefusedError):
        return None
    jobs = {job["id"]: job for job in (store or {"jobs": []})["jobs"]}
    found = []
    for group in (ledger.groups.values() if ledger is not None else []):
        if group.start is None:
            continue
        run = project_run(group)
        receipt = run_consumption(run, jobs.get(run["jobId"]), project, clock, workspace=ws.root)
        found.append((run["status"], RECEIPT_LABELS[receipt["state"]] if receipt is not None else "none"))
    return found


def _heartbeat_families(gauge, cron: dict[str, Any], ws, now_ms: int) -> None:
    """Each host's last pass (one heartbeat per host, cron/run/heartbeat.py); a heartbeat that cannot
    be trusted gives no sample and sets `sxctl_cron_heartbeat_invalid`."""
    beats = read_heartbeats(ws)
    trusted = {host: beat for host, beat in beats.items() if "invalid" not in beat
               and written_elsewhere(beat, ws) is None
               and beat["lastPassMs"] - now_ms <= CLOCK_SKEW_MS}  # ahead of this clock: doctor fails it too
    gauge("sxctl_cron_heartbeat_invalid", "1 when a pass's heartbeat cannot be trusted (unreadable, not a "
          "heartbeat, written for another workspace, or more than a minute ahead of this clock).",
          ({}, 1 if len(trusted) < len(beats) else 0))
    hosts = sorted(trusted)
    gauge("sxctl_cron_last_pass_age_seconds", "Time since the last scheduler pass, per host (no sample: none yet).",
          *[({"host": host}, (now_ms - trusted[host]["lastPassMs"]) / 1000) for host in hosts])
    gauge("sxctl_cron_last_pass_outcome", "1 for how the last pass on a host ended (ok, busy, no_store, failed).",
          *[({"host": host, "outcome": outcome}, 1 if trusted[host]["outcome"] == outcome else 0)
            for host in hosts for outcome in OUTCOMES])
    gauge("sxctl_cron_tick_running", "1 while a pass holds the store lock.", ({}, 1 if cron.get("tick_running") else 0))


def write_metrics_file(path: str | os.PathLike, text: str) -> None:
    """Replace the textfile atomically (a temp `NAME.sxctl-….tmp` beside it, which node-exporter's
    `*.prom` glob never reads, then a rename), only while it is a regular file or absent: a
    symlink, a FIFO, a device or a folder there is refused (exit 5). A new file is 0644, so that
    node-exporter, often another user, can read it; an existing one keeps its mode. A missing
    folder is made, as `--log` makes its own (under the engines' `-q` a warning is never seen)."""
    from ..engines.outside import refuse_owned_place, replace_outside_file  # loaded only for --metrics-file

    refuse_owned_place(path, "the metrics", "name a file of node-exporter's textfile folder")
    Path(path).parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    replace_outside_file(Path(path), text.encode("utf-8"), new_mode=0o644)
