"""What a comis daemon does not honour of sxctl's policy file (cron/policy/file.py). comis's
strict store has no place for sxctl's rules, so after `cron handoff` its daemon runs every job by
the store alone. `policy_losses` names, job by job, each setting the daemon ignores and what it
does instead: the rules that hold a run back (a maintenance window, a host pin, a spend guard, a
lifetime, a daily limit, active hours, `--max-unconsumed`, `--overlap`, `--catch-up skip`) and
those that change when or how a run is told (`--jitter`, `--ping-url`). Only the jobs a daemon
would run are listed: a paused job stays paused in the store, whoever runs it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...timeparse import duration_text, shown_time
from .job import Job, jobs_of


def policy_losses(store: Mapping[str, Any], policy: Mapping[str, Any], workspace: Path,
                  now: int) -> list[dict[str, Any]]:
    """`[{name, job_id, settings: [{setting, comis}]}]`, in the store's order: each scheduled job
    (not comis's built-in ones) with a setting a comis daemon ignores, what that setting is, and
    what the daemon does instead."""
    found = []
    for job in jobs_of(store, policy, workspace):
        if job.status != "scheduled" or job.built_in:
            continue
        settings = [{"setting": setting, "comis": comis} for setting, comis in _ignored(job, policy, now)]
        if settings:
            found.append({"name": job.name, "job_id": job.id, "settings": settings})
    return found


def workspace_notes(policy: Mapping[str, Any]) -> list[str]:
    """The workspace's settings a daemon ignores that hold no job back (each in words)."""
    budget = policy.get("defaults", {}).get("maxCatchup")
    return [f"comis does not use the catch-up budget (cron defaults --max-catchup {budget}): after an outage it "
            "runs every overdue job at once"] if budget else []


def _ignored(job: Job, policy: Mapping[str, Any], now: int) -> list[tuple[str, str]]:
    """(the setting, what comis does instead) for each of the job's settings comis ignores."""
    found = []
    for window in job.windows:
        if window["untilMs"] > now:  # open now, or opened by a clock ahead: either way still ahead
            whose = "the workspace's" if window is policy.get("maintenance") else "its"
            found.append((f"{whose} maintenance window until {shown_time(window['untilMs'], None, '%Y-%m-%d %H:%M')} "
                          f"({window['reason']})", "runs its occurrences inside the window"))
    if job.host is not None:
        found.append((f"--host {job.host}", "runs it on the daemon's host, whichever host that is"))
    guards = job.guards
    flags = (("rateLimitCeiling", "--rate-limit-ceiling"), ("maxSessionTokens", "--max-session-tokens"),
             ("maxTokensPerDay", "--max-tokens-per-day"))
    named = [f"{flag} {guards[key]:,}" if isinstance(guards[key], int) else f"{flag} {guards[key]:g}"
             for key, flag in flags if guards.get(key) is not None]
    if named:
        budget = " (the workspace's cron budget)" if "budget" in guards["source"].values() else ""
        found.append((f"{', '.join(named)}{budget}", "runs it whatever the agent's usage"))
    if job.max_runs is not None:
        found.append((f"--max-runs {job.max_runs}", f"keeps running it after those {job.max_runs} run(s)"))
    if job.until_ms is not None:
        found.append((f"--until {shown_time(job.until_ms, None, '%Y-%m-%d %H:%M')}", "keeps running it after then"))
    if job.max_runs_per_day is not None:
        found.append((f"--max-runs-per-day {job.max_runs_per_day}", "runs every occurrence, however many a day"))
    if job.active is not None:
        found.append((job.active.describe(job.zone_name), "runs it outside them too"))
    if job.max_unconsumed is not None:
        found.append((f"--max-unconsumed {job.max_unconsumed}", "never pauses it for unread messages"))
    if job.overlap != "queue":
        found.append((f"--overlap {job.overlap}", "runs it while its previous message is unread, and retracts none"))
    if job.catch_up == "skip":
        found.append((f"--catch-up skip --stale-after {duration_text(job.stale_after_ms)}",
                      "runs a late occurrence as a catch-up instead of skipping it"))
    if job.entry.get("jitterMs"):
        found.append((f"--jitter {duration_text(job.entry['jitterMs'])}",
                      "runs it at each due time, without the delay"))
    if job.entry.get("pingUrl"):
        from ..run.pings import mask_url  # urllib loads only for pings

        found.append((f"--ping-url {mask_url(job.entry['pingUrl'])}", "sends no ping: the monitor will say the job "
                      "stopped"))
    return found
