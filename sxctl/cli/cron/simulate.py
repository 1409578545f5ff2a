"""`sxctl cron simulate`: rehearse the schedule before trusting it (added to the cron group by
`sxctl.cli.cron`)."""

from __future__ import annotations

import click

from ...api import simulate_schedule
from ...api.times import shown_time
from ..output import DURATION, Command, completing, emit, in_workspace, say, settings, table

FATE_WORDS = {"dispatched": "dispatched", "catch_up": "catch-up", "skipped": "skipped", "held": "held",
              "given_up": "given up", "paused": "paused", "failed": "failed", "deferred": "deferred",
              "elsewhere": "other host"}


@click.command("simulate", cls=Command)
@click.option("--from", "from_time", metavar="TIME", required=True, help="First simulated pass.")
@click.option("--until", metavar="TIME", required=True, help="No pass after this time.")
@click.option("--agent-down", "agent_down", metavar="FROM..TO", multiple=True,
              help="No agent runs from FROM to TO (repeatable); otherwise it reads every message at once.")
@click.option("--machine-down", "machine_down", metavar="FROM..TO", multiple=True,
              help="The machine is off from FROM to TO (repeatable): no pass and no agent runs; the first pass "
                   "after it catches up.")
@click.option("--pass-every", "pass_every", type=DURATION, default="1m", show_default=True, metavar="DURATION",
              help="Time between simulated passes (cron runs `cron tick` once a minute).")
@click.option("--tz", metavar="ZONE", shell_complete=completing("zones"),
              help="Zone of TIMEs that name none, and of the times shown (default: local).")
@click.option("--max-catchup", "max_catchup", type=click.IntRange(0, 100_000), metavar="N",
              help="As `cron tick --max-catchup`: at most N catch-up runs a pass (default: the workspace's).")
@click.option("--usage", "usage_file", metavar="FILE",
              help='The usage block the simulated agent reports (JSON: one block, or [{"from": TIME, "usage": '
                   '{...}}, …]), to rehearse the spend guards.')
def simulate(from_time, until, agent_down, machine_down, pass_every, tz, max_catchup, usage_file) -> None:
    """Rehearse the schedule: run the real scheduler pass over a copy of the store, policy and
    ledger with a simulated clock, and print each occurrence's fate and what the agent is told.

    The simulated agent reads every message at once, except while --agent-down or --machine-down;
    it lives in the project and in every project below the workspace a job targets (a target
    outside the workspace is not rehearsed). While --machine-down no pass runs; the next pass, at
    its usual minute, sees everything that came due meanwhile, as after a weekend switched off
    (the last example).
    Nothing in the project is written, no SXCTL_DELIVER_CMD and no wake gate runs, and no agent
    need be running. At most 10081 passes run (a week of minutes, both ends; a warning says where it
    stopped). --json prints one JSON document.

    \b
    Examples:
      sxctl cron simulate --from 2026-12-01T06:00Z --until 2026-12-02T06:00Z --json
      sxctl cron simulate --from 2026-12-01T06:00Z --until 2026-12-01T18:00Z \\
        --agent-down 2026-12-01T10:00Z..2026-12-01T14:00Z --pass-every 5m
      sxctl cron simulate --from 2026-12-04T22:00Z --until 2026-12-07T09:00Z \\
        --machine-down 2026-12-04T23:00Z..2026-12-07T08:30Z
    """
    result = simulate_schedule(from_time=from_time, until=until, agent_down=agent_down,
                               machine_down=machine_down, pass_every=pass_every,
                               tz=tz, max_catchup=max_catchup, clock=settings().clock, usage=usage_file,
                               **in_workspace())
    doc, zone = result.to_json(), result.zone
    for warning in result.warnings if not settings().quiet else ():  # -q drops warnings, as everywhere
        say(f"sxctl: warning: {warning}", err=True)

    def at(ms) -> str:
        return "-" if ms is None else shown_time(ms, zone, "%Y-%m-%d %H:%M")

    def what(event: dict) -> str:
        parts = []
        if event["count"] > 1:
            parts.append(f"{event['count']} occurrences" + (f" to {at(event['last_ms'])}" if "last_ms" in event
                                                              else ""))
        if event.get("reason") and not (event["fate"] == "skipped" and event.get("detail")):  # a skip's words say it
            words = {"no_live_session": "no live agent", "max_unconsumed": "unread messages"}
            parts.append(words.get(event["reason"], event["reason"].replace("_", " "))
                         if event["fate"] in ("skipped", "held", "paused") else event["reason"])
        if event.get("until_ms"):
            parts.append(f"gives up at {at(event['until_ms'])}")
        elif event["fate"] == "held" and event.get("hold_max_ms"):  # each occurrence renews the hold
            parts.append("waits as long as it takes")
        if event.get("detail"):
            parts.append(event["detail"])
        if event.get("told") is not None:
            parts.append(f"told at {at(event['read_ms'])}: {event['told']}")
        return "; ".join(parts)

    def human() -> None:
        events = doc["events"]
        if doc["truncated"]:  # the header says what was rehearsed, with or without -q's warnings
            say(f"{doc['passes']} pass(es) from {at(doc['from_ms'])}, cut before {at(doc['stopped_at_ms'])} (the most "
                f"one rehearsal runs), not to {at(doc['until_ms'])}; nothing was written")
        else:
            say(f"{doc['passes']} pass(es) from {at(doc['from_ms'])} to {at(doc['until_ms'])}; nothing was written")
        for span in doc["machine_down"]:
            say(f"machine down from {at(span['from_ms'])} to {at(span['to_ms'])}: no pass ran")
        if doc["pings"]:
            say(f"{len(doc['pings'])} ping(s) recorded, none sent (--json lists them, URLs masked)")
        if not events:
            say("no pass ran: the machine was down all along" if doc["passes"] == 0 and doc["machine_down"]
                else "no occurrence came due")
            return
        table(["PASS", "JOB", "OCCURRENCE", "FATE", "DETAIL"],
              [[at(e["pass_ms"]), e["job"], at(e["occurrence_ms"]), FATE_WORDS[e["fate"]], what(e)] for e in events])

    emit(doc, human)
