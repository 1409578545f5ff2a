"""The scheduler pass as a use case: `cron tick` (one pass: reconcile dead claims, run due jobs,
settle) and `cron run` (one job now, or one pass), spec runner.md."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from io import RawIOBase
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..clock import SYSTEM_CLOCK, Clock
from ..cron.policy.file import read_policy
from ..cron.run.failures import FAILED_STATUSES
from ..cron.run.heartbeat import pending_pings, record_pass
from ..cron.run.pings import MAX_TIMEOUT_S, check_ping_url
from ..cron.run.tick import SchedulerPass, TickOptions
from ..cron.store.file import default_agent_id, read_store
from ..engines.ticklog import TickLog
from ..errors import ErrorCode, SxctlError, UsageError
from ..interrupts import deferred_interrupts
from ..record import record
from ..report import Reporter
from .jobs import ledger_ceiling
from .scope import find_workspace, reporter, target_project

if TYPE_CHECKING:
    from ..cron.run.pass_report import PassReport
    from ..cron.run.tick import SchedulerPass
    from ..cron.store.workspace import Workspace


@record
class PassOutcome:
    """`cron tick`: what one pass did (runs, deferrals, reconciled claims) and its warnings."""

    workspace: Workspace
    report: PassReport
    warnings: list[str]
    interrupted: bool = False  # SIGTERM or Ctrl-C came: it finished the runs it had started, began no other

    def to_json(self) -> dict[str, Any]:
        doc = self.report.to_json(self.warnings)
        return {**doc, "ok": False, "interrupted": True} if self.interrupted else doc


@record
class ManualRun:
    """`cron run`: a forced run of one job (`mode` force) or one full pass (`mode` due)."""

    mode: str
    name: str | None
    agent_id: str
    outcome: PassOutcome

    @property
    def failed(self) -> list[dict[str, Any]]:
        """The runs it made that did not succeed (`failed`, `unknown`, …), each with its `reason`."""
        return [run for run in self.outcome.report.runs if run.get("status") in FAILED_STATUSES]

    def raise_if_failed(self) -> None:
        """Exit 10 (`run_failed`) when a run it made did not succeed: the reason of each, and the
        command that shows the runs; the JSON failure document keeps every key of `to_json`."""
        failed = self.failed
        if not failed:
            return
        said = "; ".join(f"{run['name']}: {run.get('reason') or run['status']}" for run in failed)
        names = list(dict.fromkeys(run["name"] for run in failed))
        runs = " / ".join(f"`sxctl cron runs {name}`" for name in names)
        raise SxctlError(f"the run did not succeed: {said} (see {runs})", code=ErrorCode.RUN_FAILED,
                         details=self.to_json())

    def to_json(self) -> dict[str, Any]:
        runs = self.outcome.report.runs
        doc: dict[str, Any] = {"ok": not self.failed, "triggered": bool(runs), "mode": self.mode,
                               "resolvedAgentId": self.agent_id}
        if self.mode == "force":
            entry = runs[0] if runs else None
            doc.update(jobName=self.name, executionId=entry["executionId"] if entry else None, run=entry)
        else:
            doc["executionIds"] = [r["executionId"] for r in runs]
        doc["report"] = self.outcome.to_json()
        return doc


def tick_log(path: str | os.PathLike, max_bytes: int, *, clock: Clock = SYSTEM_CLOCK,
             fallback: Any = None) -> RawIOBase:
    """The bounded log file of `cron tick --log`: a raw stream that stamps each line with its
    time in the display zone (with the offset) and moves `path` to `path.1` before it would pass
    `max_bytes` (`fallback`: where a line goes when the file cannot be written)."""
    return TickLog(Path(path), max_bytes, clock.now_ms, fallback=fallback)


def _scheduler(workspace, project, session, clock: Clock, report: Reporter | None, options: dict[str, Any]
               ) -> SchedulerPass:
    """A pass with `options`: the fields of `sxctl.cron.run.tick.TickOptions` (the flags of
    `cron tick`; durations in seconds) other than the project."""
    ws = find_workspace(workspace, project=project, session=session)
    if options.get("ping_url") is not None:
        check_ping_url(options["ping_url"])
    if not 0 < options.get("ping_timeout", 1) <= MAX_TIMEOUT_S:
        raise UsageError(f"--ping-timeout must be more than 0 and at most {MAX_TIMEOUT_S:g}s")
    tick_options = TickOptions(project=target_project(ws, project, session=session), **options)
    tick_options = dataclasses.replace(tick_options, max_log_bytes=ledger_ceiling(options.get("max_log_bytes")))
    return SchedulerPass(ws, tick_options, clock=clock, report=reporter(report))


def _ping_urls(ws) -> set[str]:
    """The `--ping-url` of every job (none when the policy file is unreadable: the pass says why)."""
    try:
        return {entry["pingUrl"] for entry in read_policy(ws)["jobs"].values() if "pingUrl" in entry}
    except SxctlError:
        return set()


def _heartbeat(scheduler: SchedulerPass, run: Callable[[], PassOutcome]) -> PassOutcome:
    """Run a pass and record how it ended: `ok`, `busy` (another pass held the lock), `no_store`,
    or `failed` with the error (and re-raise it). Around it, the pings (cron/run/pings.py): the ones
    the last pass here could not send first, then the pass's own `--ping-url` (start; success, or
    fail when the pass failed or found no store; nothing more when another pass held the lock),
    all kept in the heartbeat."""
    if scheduler.options.dry_run:
        return run()
    pinger, url, boot = scheduler.pinger, scheduler.options.ping_url, scheduler.boot_id
    pinger.pending = pending_pings(scheduler.ws, scheduler.host,
                                   lambda: _ping_urls(scheduler.ws) | ({url} if url else set()))
    pinger.retry_pending()
    if url:
        pinger.ping(url, "start", boot, "scheduler pass started")
    try:
        outcome = run()
    except (SxctlError, OSError) as error:
        detail = f"{error.code}: {error.message}" if isinstance(error, SxctlError) else str(error)
        if url:
            pinger.ping(url, "fail", boot, f"the pass failed: {detail}")
        record_pass(scheduler.ws, "failed", clock=scheduler.clock, detail=detail, host=scheduler.host,
                    extra={"pings": pinger.state()})
        raise
    report = outcome.report
    state = "busy" if report.skipped else "ok" if report.store_exists else "no_store"
    detail = f"{len(report.runs)} run(s), {len(report.admission.waiting)} waiting"
    if url and state != "busy":
        pinger.ping(url, "success" if state == "ok" else "fail", boot,
                    detail if state == "ok" else f"no cron store at {scheduler.ws.store}")
    for warning in pinger.warnings:
        scheduler.report.warn(warning)
    unwritten = record_pass(scheduler.ws, state, clock=scheduler.clock, host=scheduler.host, detail=detail,
                            extra={"pings": pinger.state()})
    if unwritten is not None:
        scheduler.report.warn(f"this pass could not record its heartbeat ({unwritten}): `sxctl doctor` "
                              "cannot show that passes run")
    return PassOutcome(outcome.workspace, report, scheduler.report.warnings)


def _finish(scheduler: SchedulerPass, report: PassReport) -> PassOutcome:
    """Why nothing happened — the lock was busy, there is no store, nothing was due — is a note
    (so `-q` prints nothing at all then)."""
    if report.skipped:
        scheduler.report.note(f"skipped this pass: {report.skipped} (another pass holds the store lock)")
    if not report.store_exists:
        scheduler.report.note(f"no cron store at {scheduler.ws.store}: nothing to do")
    elif not report.skipped and not report.lines() and not scheduler.report.quiet:
        scheduler.report.note(report.idle_text(*_next_run(scheduler)))
    return PassOutcome(scheduler.ws, report, scheduler.report.warnings)


def _next_run(scheduler: SchedulerPass) -> tuple[bool, dict[str, Any] | None]:
    """After an idle pass: whether a job of the user's is scheduled, and the first run on the
    jobs' timelines, as `cron next` shows it (one reading of the jobs for both)."""
    from ..cron.timeline.previews import job_previews

    if not scheduler.store.get("jobs"):
        return False, None
    ws, options = scheduler.ws, scheduler.options
    found = job_previews(ws, scheduler.store, scheduler.policy, options.project, scheduler.clock, 1, to=options.to)
    scheduled = any(job.status == "scheduled" and not job.built_in for job in found.jobs.values())
    return scheduled, found.next_due()


def tick(*, workspace=None, project=None, session: str | None = None, clock: Clock = SYSTEM_CLOCK,
         report: Reporter | None = None, metrics_file: str | os.PathLike | None = None, **options: Any) -> PassOutcome:
    """One scheduler pass: reconcile dead claims, dispatch at most `max_per_pass` due jobs into the
    agent's inbox, settle; nothing claimed is ever run twice. `options` are `TickOptions` fields.
    Every pass but a dry run leaves its host's heartbeat (`.scheduler/sxctl-tick/<host>.json`), and with
    `metrics_file` the project's metrics there (`write_metrics`: a failure is a warning; a file
    inside .scorpiox/ or .scheduler/ is refused before the pass, exit 2)."""
    if metrics_file is not None:
        from ..engines.outside import refuse_owned_place  # the engines load only for --metrics-file

        refuse_owned_place(metrics_file, "the metrics", "name a file of node-exporter's textfile folder")
    scheduler = _scheduler(workspace, project, session, clock, report, options)
    # SIGTERM (a service stopping) or Ctrl-C: the pass finishes the runs it started, then says so
    with deferred_interrupts() as held:
        scheduler.stopping = lambda: held.signal is not None
        try:
            outcome = _heartbeat(scheduler, lambda: _finish(scheduler, scheduler.run()))
        finally:
            if metrics_file is not None and not scheduler.options.dry_run:
                from .observe import write_metrics  # the views load only for --metrics-file

                write_metrics(metrics_file, session=session, project=scheduler.options.project,
                              workspace=scheduler.ws, max_log_bytes=scheduler.options.max_log_bytes, clock=clock,
                              report=scheduler.report)
    outcome.interrupted = held.signal is not None  # the CLI shows the pass, then exits 130 saying so
    return outcome


def run_job(name: str | None = None, *, mode: str = "force", agent: str | None = None, workspace=None,
            project=None, session: str | None = None, clock: Clock = SYSTEM_CLOCK, report: Reporter | None = None,
            **options: Any) -> ManualRun:
    """Run job `name` now (`mode="force"`, trigger manual), or one full pass (`mode="due"`);
    `options` are `TickOptions` fields, as for `tick`."""
    if mode == "force" and name is None:
        raise UsageError("cron run --mode force needs a job NAME")
    scheduler = _scheduler(workspace, project, session, clock, report, options)
    if mode == "force" and name is not None:
        outcome = _finish(scheduler, scheduler.run_forced(name))
        for warning in scheduler.pinger.warnings:  # a forced run keeps no heartbeat: not sent again
            scheduler.report.warn(warning.replace("it is sent again at the next pass", "not sent again"))
    else:
        outcome = _heartbeat(scheduler, lambda: _finish(scheduler, scheduler.run()))
    return ManualRun(mode, name, default_agent_id(read_store(scheduler.ws), agent, os.environ), outcome)
