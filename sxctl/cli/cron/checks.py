"""`sxctl cron status/runs/validate`: evidence from the store and the ledger (api/cron_checks.py)."""

from __future__ import annotations

import os

import click

from ...api import cron_status, job_runs, validate_workspace
from ...api.cron_checks import describe_consumption
from ...errors import UsageError
from ..output import Command, completing, emit, in_workspace, say, say_fitted, settings, table
from .options import max_log_option, when


@click.command("status", cls=Command)
@max_log_option
def status(max_log_bytes) -> None:
    """Offline evidence: files and digests, locks, daemon ownership, claims, problems.

    \b
    Example:
      sxctl cron status --json | jq .problems
    """
    doc = cron_status(max_log_bytes=max_log_bytes, clock=settings().clock, **in_workspace()).to_json()

    def size(evidence: dict) -> str:
        return f"{evidence['bytes']} bytes" if evidence["exists"] else "missing"

    def human() -> None:
        say(f"workspace   {doc['workspace']}")
        say(f"store       {size(doc['store'])}, {doc['jobCount']} job(s), {doc['activeClaimCount']} active claim(s)")
        say(f"ledger      {size(doc['ledger'])}")
        say(f"policy      {size(doc['policy'])}")
        invalid = ", ".join(dict.fromkeys(os.path.basename(p["file"]) for p in doc["problems"]
                                          if p["code"] == "invalid_data"))
        say(f"valid       {'yes' if doc['strictAuthoritiesValid'] and doc['policyValid'] else f'NO ({invalid})'}")
        say(f"owner       {doc['owner']}")
        job = doc.get("next_due_job")
        mark = f", {doc['next_due_mark']}" if doc.get("next_due_mark") else ""
        say(f"next due    {when(doc['next_due_ms'])}{f' ({job}{mark})' if job else ''}")
        for problem in doc["problems"]:
            say(f"problem     {problem['code']}: {problem['message']}")

    emit(doc, human)


@click.command("runs", cls=Command)
@click.argument("name", required=False, shell_complete=completing("jobs"))
@click.option("--limit", type=click.IntRange(1, 10_000), default=20, show_default=True)
@click.option("--all-jobs", is_flag=True, help="Runs of every job.")
@click.option("--exact", is_flag=True, help="Scan the whole ledger instead of its tail.")
@click.option("--evidence", is_flag=True, help="For unknown runs: was their inbox message written?")
@max_log_option
def runs(name, limit, all_jobs, exact, evidence, max_log_bytes) -> None:
    """Recent executions of a job, newest first (reads only the tail of the ledger).

    \b
    Examples:
      sxctl cron runs nightly --limit 5
      sxctl cron runs --all-jobs --json | jq '.runs[] | select(.status=="unknown")'
    """
    if (name is None) == (not all_jobs):
        raise UsageError("give a job NAME or --all-jobs")
    result = job_runs(name, limit=limit, exact=exact, evidence=evidence, max_log_bytes=max_log_bytes,
                      clock=settings().clock, **in_workspace())
    found, names = result.runs, result.job_names

    def human() -> None:
        for skip in result.skipped:
            say_fitted(f"skipped {_occurrences(skip)}: {skip['reason'].replace('_', ' ')}")
        if not found:
            say("no runs")
            return
        headers = ["STARTED", "STATUS", "READ", "TOKENS", "DELIVERY", "TRIGGER", "WORK", "ERROR", "COUNTERS",
                   "EXECUTION ID"]
        rows = [[when(r["startedAtMs"]), r["status"], describe_consumption(r.get("consumption")),
                 f"{r['tokens']:,}" if r.get("tokens") is not None else "-",
                 r["deliveryStatus"], r["trigger"], r["workKind"], r.get("errorKind"),
                 ", ".join(f"{c['name']}={c['value']}" for c in r.get("counters", [])) or None,
                 r["executionId"] + _dispatch_note(r)] for r in found]
        if all_jobs:  # which job each run belongs to (by id once the job is gone)
            headers.insert(0, "JOB")
            for row, r in zip(rows, found, strict=True):
                row.insert(0, names.get(r["jobId"]) or r["jobId"])
        if evidence:
            headers.append("EVIDENCE")
            for row, r in zip(rows, found, strict=True):
                row.append(_evidence_text(r.get("evidence")))
        table(headers, rows, fit=_CUT_FIRST)

    emit(result.to_json(), human)


def _occurrences(skip: dict) -> str:
    """`1 occurrence at TIME`, `3 occurrences from TIME to TIME`."""
    if skip["count"] == 1:
        return f"1 occurrence at {when(skip['scheduledForMs'])}"
    return f"{skip['count']} occurrences from {when(skip['scheduledForMs'])} to {when(skip['lastMs'])}"


#: the columns of `cron runs` cut (with …) to fit a terminal, first cut first (`--json` has them whole)
_CUT_FIRST = ("EXECUTION ID", "COUNTERS", "ERROR", "DELIVERY", "WORK", "READ", "TOKENS", "STARTED", "JOB", "EVIDENCE")


def _dispatch_note(run: dict) -> str:
    outcome = run.get("outcome") or {}
    if outcome.get("kind") == "inbox_dispatch":
        return f" → {outcome['sessionId']}/{outcome['stem']} ({outcome['mode']})"
    return ""


def _evidence_text(evidence: dict | None) -> str | None:
    """One cell: where an unknown run's message is now, found through its key record."""
    if evidence is None:
        return None
    if not evidence.get("key_record"):
        return "no message was written"
    return f"message {evidence['stem']} {evidence['state']} in {evidence['session']}"


@click.command("validate", cls=Command)
@max_log_option
def validate(max_log_bytes) -> None:
    """Check the store, sxctl's policy file and the ledger completely, plus their cross-checks;
    exit 5 on any problem, naming its file.

    \b
    Example:
      sxctl cron validate && echo "store, policy file and ledger are sound"
    """
    result = validate_workspace(max_log_bytes=max_log_bytes, clock=settings().clock, **in_workspace())
    for problem in result.problems if not settings().json else []:
        where = f":{problem.line}" if problem.line is not None else ""
        say(f"{problem.file}{where}: {problem.code}: {problem.message}", err=True)
    result.raise_if_invalid()
    emit(result.to_json(), lambda: say(f"{result.workspace.scheduler}: valid"))
