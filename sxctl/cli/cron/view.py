"""`sxctl cron list/show/next`: the jobs and their coming fires."""

from __future__ import annotations

import json

import click

from ...api import list_jobs, next_fires, show_job
from ...api.job_views import describe_schedule, job_kind_label, schedule_computable, target_label
from ...api.times import duration_text, format_duration_ms, format_relative_ms, shown_time
from ..output import Command, completing, emit, in_workspace, say, settings, table
from .options import when


@click.command("list", cls=Command)
@click.option("--tz", metavar="ZONE", shell_complete=completing("zones"),
              help="Show times in this zone (default: local, whatever the job's own zone).")
def list_(tz) -> None:
    """List the jobs: kind, schedule, state, next run and target (no payload text).

    \b
    Examples:
      sxctl cron list
      sxctl cron list --json | jq -r '.jobs[] | select(.state=="scheduled") | .job.name'
    """

    result = list_jobs(tz=tz, agent=settings().agent, clock=settings().clock, **in_workspace())
    rows, zone = result.rows, result.zone

    def human() -> None:
        if not rows:
            say(f"no cron jobs in {result.workspace.store}")
            return
        table(["NAME", "KIND", "SCHEDULE", "STATE", "NEXT", "TARGET"], [
            [r["job"]["name"], job_kind_label(r["job"]),
             describe_schedule(r["job"]["schedule"], r["tz"]) if schedule_computable(r["job"]["schedule"]) else "?",
             _state(r),
             _next(r, zone) if r["state"] not in ("done", "failed") else "-",
             target_label(r["target"])]
            for r in rows
        ])

    emit(result.to_json(), human)


def _state(row: dict) -> str:
    """The STATE cell: `waiting` for a scheduled job whose due run the pass holds now (--json: its
    `next_mark`), else the job's state."""
    mark = row.get("next_mark") or ""
    return "waiting" if row["state"] == "scheduled" and mark.startswith(("waiting", "held:")) else row["state"]


def _next(row: dict, zone) -> str:
    """The NEXT cell: the next run the pass will make, its mark (as `cron next` shows it), and what
    waits before it (or why none)."""
    note, mark = row.get("next_note"), row.get("next_mark")
    if row["next_run_ms"] is None:
        return note or "-"
    return f"{when(row['next_run_ms'], zone)}{f' ({mark})' if mark else ''}{f' after {note}' if note else ''}"


@click.command("show", cls=Command)
@click.argument("name", shell_complete=completing("jobs"))
def show(name) -> None:
    """Show one job in full.

    \b
    Example:
      sxctl cron show nightly --json
    """

    result = show_job(name, clock=settings().clock, **in_workspace())
    row, zone = result.row, result.zone

    def human() -> None:
        target = f", target {target_label(row['target'])}" if row["target"] else ""
        say(f"{name}: {row['state']}, next {_next(row, zone)}{target}")
        if row.get("failure"):
            say(f"its run failed: {row['failure']['reason']} (see `sxctl cron runs {name}`)")
        if row.get("policy"):
            say(f"policy: {_policy_text(row['policy'], zone)}")
        shared = row["workspacePolicy"]
        if shared.get("maxCatchup"):
            say(f"workspace: at most {shared['maxCatchup']} catch-up run(s) per pass")
        if shared.get("maintenance"):
            say(f"workspace: maintenance until {when(shared['maintenance']['untilMs'], zone)}: "
                f"{shared['maintenance']['reason']}")
        say(json.dumps(row["job"], indent=2, ensure_ascii=False), lines=True)

    emit(result.to_json(), human)


@click.command("next", cls=Command)
@click.argument("name", required=False, shell_complete=completing("jobs"))
@click.option("-n", "count", type=click.IntRange(1, 1000), default=5, show_default=True)
@click.option("--tz", metavar="ZONE", shell_complete=completing("zones"),
              help="Display zone (and the zone of an ad-hoc --cron).")
@click.option("--from", "from_time", metavar="TIME", help="Start after this time (default now).")
@click.option("--include-paused", is_flag=True, help="Continue the series of paused jobs.")
@click.option("--cron", "cron_expr", metavar="EXPR", help="Preview this expression instead of the store.")
@click.option("--every", metavar="DURATION", help="Preview a fixed period.")
@click.option("--anchor", metavar="TIME", help="Phase of --every.")
@click.option("--at", "at_time", metavar="TIME", help="Preview a one-shot time.")
@click.option("--fold", type=click.Choice(["earlier", "later"]))
def next_(name, count, tz, from_time, include_paused, cron_expr, every, anchor, at_time, fold) -> None:
    """Preview the next fire times of the store's jobs, or of an ad-hoc schedule (no store needed).

    \b
    Examples:
      sxctl cron next -n 10
      sxctl cron next --cron "30 2 * * *" --tz Europe/Berlin --from 2026-03-28T00:00Z -n 3
      sxctl cron next --every 90m --anchor 2026-12-01T00:00Z
    """
    result = next_fires(name, count=count, tz=tz, after=from_time, include_paused=include_paused, cron=cron_expr,
                        every=every, anchor=anchor, at=at_time, fold=fold, clock=settings().clock, **in_workspace())
    fires, now = result.fires, result.now_ms

    def human() -> None:
        if not fires:
            say("no upcoming fires")
            return
        def mark(fire: dict) -> str:
            """The run's timeline mark, with when a hold ends or why a guard holds it."""
            held, word = fire.get("waiting"), fire.get("mark") or ""
            if held is not None and held.get("detail"):  # a spend guard: its reason in words
                return f"{word} ({held['detail']})"
            if held is not None and "wait" in word:  # no give-up time: each occurrence renews the hold
                return (f"{word} until {shown_time(held['giveUpAtMs'], result.zone, '%Y-%m-%d %H:%M')}"
                        if held.get("giveUpAtMs") is not None else f"{word} as long as it takes")
            if word == "given up":
                return "given up at the next pass (no live agent past its --hold-max)"
            return word

        table(["WHEN", "IN", "JOB", "NOTE"], [
            [shown_time(f["at_ms"], result.zone), format_relative_ms(f["at_ms"], now), f["name"] or "-",
             ", ".join(n for n, on in ((mark(f), f.get("mark")), (f"after {f.get('note')}", f.get("note")),
                                        (f"on host {f.get('host')}", f.get("host")),
                                        (f"pings {f.get('pingUrl')}", f.get("pingUrl")),
                                        ("dst", f["dst"])) if on)]
            for f in fires
        ])

    emit(result.to_json(), human)




def _policy_text(policy: dict, zone) -> str:
    """sxctl's policy of a job in one line (`cron show`; `--json` has every field)."""
    parts = []
    if policy.get("holdMaxMs") == 0:
        parts.append("does not wait for a live agent (--hold-max 0)")
    elif policy.get("holdMaxMs") is not None:
        parts.append(f"hold up to {format_duration_ms(policy['holdMaxMs'])} for a live agent")
    catch_up = policy.get("catchUp") or "once"
    stale = f" (stale after {format_duration_ms(policy['staleAfterMs'])})" if policy.get("staleAfterMs") else ""
    note = "" if policy.get("missedNote", True) else ", no missed note"
    parts.append(f"catch-up {catch_up}{stale}{note}")
    if policy.get("activeHours"):
        days = policy.get("activeDays")
        shown = ",".join(days) if isinstance(days, list) else days or "every day"
        parts.append(f"active {policy['activeHours']} {shown}")
    if policy.get("maxRunsPerDay"):
        parts.append(f"at most {policy['maxRunsPerDay']} run(s) a day")
    if policy.get("maxUnconsumed"):
        parts.append(f"pause after {policy['maxUnconsumed']} unread")
    if policy.get("maxRuns"):
        parts.append(f"expires after {policy['maxRuns']} run(s) ({policy.get('runs') or 0} so far)")
    if policy.get("untilMs") is not None:
        fmt = "%Y-%m-%d %H:%M:%S" if policy["untilMs"] % 60_000 else "%Y-%m-%d %H:%M"  # never shown earlier than it is
        parts.append(f"expires at {shown_time(policy['untilMs'], zone, fmt)}")
    if policy.get("tz"):
        parts.append(f"zone {policy['tz']}")
    if policy.get("overlap") not in (None, "queue"):
        parts.append(f"overlap {policy['overlap']}")
    if policy.get("maintenance"):
        window = policy["maintenance"]
        parts.append(f"maintenance until {shown_time(window['untilMs'], zone, '%Y-%m-%d %H:%M')}: {window['reason']}")
    if policy.get("host") not in (None, "any"):
        parts.append(f"only on host {policy['host']}")
    if policy.get("pingUrl"):
        parts.append(f"pings {policy['pingUrl']}" + (" when read" if policy.get("pingOn") == "read" else ""))  # masked
    if policy.get("expiresMs"):
        parts.append(f"a message unread for {duration_text(policy['expiresMs'])} is withdrawn")
    if policy.get("readWithinMs"):
        parts.append(f"read within {duration_text(policy['readWithinMs'])}")
    if policy.get("jitterMs"):
        parts.append(f"jitter {format_duration_ms(policy['jitterMs'])} (runs "
                     f"{format_duration_ms(policy.get('jitterOffsetMs') or 0)} after each due time)")
    if policy.get("rateLimitCeiling") is not None:  # the spend guards (the budget's apply where unset)
        parts.append(f"rate-limit ceiling {policy['rateLimitCeiling']:g}")
    if policy.get("maxSessionTokens") is not None:
        parts.append(f"session tokens < {policy['maxSessionTokens']:,}")
    if policy.get("maxTokensPerDay") is not None:
        parts.append(f"at most {policy['maxTokensPerDay']:,} tokens a day")
    if policy.get("onMissingUsage") is not None:
        parts.append(f"missing usage: {policy['onMissingUsage']}")
    paused = policy.get("paused")
    if isinstance(paused, dict):  # paused by sxctl: why, when, in words
        when = shown_time(paused.get("atMs") or 0, zone, "%Y-%m-%d %H:%M")
        parts.append(f"paused by sxctl ({paused.get('reason')}) at {when}: {paused.get('message') or ''}".rstrip(": "))
    return "; ".join(parts)
