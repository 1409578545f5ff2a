"""`doctor`'s checks of the workspace's scheduler: the cron files, whether a pass runs, the jobs'
target projects and the ledger."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

from ..clock import CLOCK_SKEW_MS, Clock
from ..cron.policy.file import read_policy
from ..cron.run.failures import last_failures
from ..cron.run.file_checks import check_files, cross_check, history_problem
from ..cron.run.heartbeat import FOLDER, read_heartbeat, written_elsewhere
from ..cron.run.ledger import project_run
from ..cron.store.file import daemon_locks
from ..cron.store.targets import agent_target, target_problems
from ..cron.timeline.previews import job_previews
from ..engines import TickCommand, block_projects, has_block, installed_entry, systemd_unit_dir
from ..errors import SxctlError
from ..project import SCORPIOX_DIR
from ..timeparse import format_duration_ms
from .engine_checks import export_flags
from .findings import Findings

#: a workspace with jobs and no pass for this long has no working scheduler
NO_PASS_FAIL_MS = 3 * 60_000
#: passes that found the store lock busy for this long (no pass ran) are a failed check
BUSY_FAIL_MS = 15 * 60_000
LEDGER_WARN_SHARE = 0.8


def check_cron_files(found: Findings, ws, max_log_bytes: int, clock) -> tuple[dict[str, Any], Any] | None:
    """The store, sxctl's policy file and the ledger, each read and checked as a scheduler pass
    reads them (a pass stops on any of them, and on a claim or run recorded after this clock's
    now): the store and the ledger, or None when one is invalid."""
    store, ledger, problems = check_files(ws, max_log_bytes)
    if store is not None and ledger is not None and not problems:
        behind = [p for p in cross_check(store, ledger, ws, clock) if p.code == "clock_behind"]
        if behind:
            where = os.path.basename(behind[0].file)
            found.add("cron files", "fail", f"{behind[0].message}: this clock is behind what {where} records, "
                      "and every scheduler pass and cron edit stops on it (clock_behind)",
                      "sxctl cron repair --clock   # when this clock is right and a clock that ran ahead made "
                      "those records; else fix this clock (timedatectl status) or wait until then")
            return None
    if problems:
        names = ", ".join(dict.fromkeys(os.path.basename(p.file) for p in problems))
        stops = "every scheduler pass stops on it" if os.path.lexists(ws.store) else "cron commands stop on it"
        found.add("cron files", "fail", f"{problems[0].message}; {stops}",
                  f"sxctl cron validate   # names each problem in {names}; sxctl never rewrites an invalid file: "
                  "fix it by hand or move it aside")
        return None
    history = history_problem(ws)
    if history is not None:  # only `cron runs` needs it: a warning, not a stop
        found.add("cron files", "warn", history.message, f"mv {shlex.quote(history.file)} "
                  f"{shlex.quote(history.file + '.damaged')}   # the next pass starts a new one")
    else:
        found.add("cron files", "ok", "store, policy file and ledger are valid" if store is not None
                  else "no cron store")
    return store or {"jobs": [], "activeClaims": []}, ledger


def check_scheduler(found: Findings, ws, store: dict[str, Any], clock: Clock, environ, crontab_text, project) -> None:
    """Is a scheduler pass running? Judged from the heartbeat, which every pass writes, and only
    from a heartbeat that is a record a pass writes and whose time this clock can believe."""
    now = clock.now_ms()
    jobs = [job for job in store["jobs"] if job["lifecycle"]["status"] in ("scheduled", "one_shot_claimed")]
    beat = read_heartbeat(ws)  # the newest one any host wrote (health/host_checks.py: every host's)
    path = (beat or {}).get("path") or ws.scheduler / FOLDER
    engine = _installed_engine(ws, project, environ, crontab_text)
    replace = f"mv {path} {path}.bad && sxctl cron tick   # a pass writes a new one"
    if not jobs:
        if beat is not None and "invalid" in beat:
            found.add("scheduler", "warn", f"no scheduled jobs; the heartbeat {path} cannot be trusted: "
                      f"{beat['invalid']}", replace)
        else:
            found.add("scheduler", "ok", "no scheduled jobs" + (f"; {engine}" if engine else ""))
        return
    install = "sxctl cron export --target crontab --install   # or --target systemd"
    if beat is None:
        found.add("scheduler", "fail", f"{len(jobs)} scheduled job(s) and no scheduler pass has ever run here",
                  install if not engine else "check the installed entry: " + engine)
    elif "invalid" in beat:
        found.add("scheduler", "fail", f"{len(jobs)} scheduled job(s) and the heartbeat {path} cannot be trusted: "
                  f"{beat['invalid']}; nothing shows that a pass runs", replace)
    else:
        age = now - beat["lastPassMs"]
        where = f"last pass {format_duration_ms(max(age, 0))} ago on {beat['host']} ({beat['outcome']})"
        ran_for = written_elsewhere(beat, ws)
        if ran_for is not None:
            found.add("scheduler", "fail", f"{len(jobs)} scheduled job(s) and the heartbeat was written by a pass for "
                      f"{ran_for} (this workspace was copied or moved from there): no pass is known to run here",
                      install if not engine else "check the installed entry: " + engine)
        elif age < -CLOCK_SKEW_MS:
            found.add("scheduler", "fail", f"the heartbeat {path} is {-age // 1000}s ahead of this clock (written "
                      f"on {beat['host']}): the clocks disagree, so no pass can be shown to run",
                      f"timedatectl status   # here and on {beat['host']}: synchronise both clocks (NTP); "
                      "the next pass rewrites the heartbeat")
        elif age > NO_PASS_FAIL_MS:
            found.add("scheduler", "fail", f"{len(jobs)} scheduled job(s) and no scheduler pass for "
                      f"{format_duration_ms(age)}; {where}",
                      ("check the installed entry: " + engine) if engine else install)
        elif beat["outcome"] == "failed":
            found.add("scheduler", "fail", f"the last pass failed: {beat['detail']}",
                      "sxctl cron tick   # run one pass by hand to see the error")
        elif beat["outcome"] == "no_store":
            found.add("scheduler", "fail", f"the last pass found no store, but {ws.store} holds {len(jobs)} "
                      f"scheduled job(s): the installed pass looks at another workspace; {where}",
                      "sxctl cron export --target crontab --install   # again, from this project")
        elif beat["outcome"] == "busy" and now - (beat.get("busySinceMs") or now) > BUSY_FAIL_MS:
            found.add("scheduler", "fail", f"every pass for {format_duration_ms(now - beat['busySinceMs'])} "
                      f"found the store lock busy: a pass hangs, or a lock is left behind; {where}",
                      f"ls -la --time-style=full-iso {ws.scheduler}   # see the locks check; "
                      "stop a hung `sxctl cron tick`, or rmdir a lock no process holds")
        else:
            found.add("scheduler", "ok", where + (f"; {engine}" if engine else ""))
    try:
        policy = read_policy(ws)  # a job's --jitter and a maintenance window move when it is overdue
    except SxctlError:  # the cron files check names it
        policy = None
    overdue = job_previews(ws, store, policy, project or ws.root, clock, 1).overdue(now) \
        if policy is not None else []
    if overdue:
        found.add("overdue", "warn", f"overdue job(s): {', '.join(overdue[:5])}",
                  "sxctl status   # waiting for the agent, or no pass running?")


def check_job_targets(found: Findings, ws, store: dict[str, Any]) -> None:
    """Does every job's target project resolve in this workspace, and will it still after a copy,
    a move or a container mount? (`cron.store.targets.target_problems`, resolved as dispatch resolves
    them.) A target that resolves to no project fails, and so does one that sends into the
    project this workspace was copied from, when the job would run an agent turn or a heartbeat
    now; the rest warn, each with the `cron update` that fixes it."""
    problems = target_problems(store, ws.root)
    total = sum(1 for job in store["jobs"] if "deliveryTarget" in job
                and job["lifecycle"]["status"] != "one_shot_terminal")
    if not problems:
        found.add("job targets", "ok", f"{total} job target(s) resolve in this workspace" if total
                  else "no job has a target of its own")
        return

    def update(name: str, folder: str) -> str:  # a name that starts with '-' goes after `--`
        if name.startswith("-"):
            return f"sxctl cron update --to-project {folder} -- {shlex.quote(name)}"
        return f"sxctl cron update {shlex.quote(name)} --to-project {folder}"

    def fix(problem) -> str:
        return update(problem.job["name"],
                      shlex.quote(str(problem.suggestion)) if problem.suggestion is not None else "DIR")

    def fixes(group) -> str:
        shown = "; ".join(fix(p) for p in group[:3])
        more = f"   # and the same for the other {len(group) - 3}" if len(group) > 3 else ""
        unknown = "   # DIR: the folder that holds the project's .scorpiox/ now" \
            if any(p.suggestion is None for p in group[:3]) else ""
        return shown + (more or unknown)

    def names(group) -> str:
        listed = ", ".join(p.job["name"] for p in group[:5])
        return listed + (f" and {len(group) - 5} more" if len(group) > 5 else "")

    def blocking(problem) -> bool:  # it would dispatch into the wrong place, or fail, at its next run
        return problem.job["lifecycle"]["status"] in ("scheduled", "one_shot_claimed") \
            and problem.job["payload"]["kind"] in ("agent_turn", "heartbeat_event")

    for kind in ("linked", "link", "missing", "copied", "absolute", "outside"):
        group = [p for p in problems if p.kind == kind]
        if not group:
            continue
        first = group[0]
        where = f"{first.resolved}" + ("" if first.stored == str(first.resolved) else f" (stored as {first.stored!r})")
        jobs = f"job {first.job['name']} sends" if len(group) == 1 else f"{len(group)} jobs ({names(group)}) send"
        also = "" if len(group) == 1 else " (the first)"
        status = "fail" if kind in ("linked", "link", "missing", "copied") and any(blocking(p) for p in group) \
            else "warn"
        if kind == "linked":
            found.add("job targets", status, f"{jobs} to {where}{also}, through a symbolic link below this "
                      f"workspace ({ws.root}): a relative target must be a folder of the workspace, and a run "
                      "is refused (`precondition`) rather than sent where the link points", fixes(group))
        elif kind == "link":
            found.add("job targets", status, f"{jobs} to {where}{also}, whose .scorpiox is a symbolic link: sxctl "
                      "never writes through one, so every run fails `precondition`",
                      f"replace {first.resolved / '.scorpiox'} by the folder it points to, or send to the project "
                      "that holds that folder: " + fixes(group))
        elif kind == "missing":
            found.add("job targets", status, f"{jobs} to a project that is not there: {where}{also} holds no "
                      ".scorpiox/ folder, so every run fails `precondition`", fixes(group))
        elif kind == "copied":
            found.add("job targets", status, f"{jobs} into {where}, the project this workspace ({ws.root}) was "
                      "copied from (its store has the same seed): the runs go to that project's agent, not to "
                      "this one's", fixes(group))
        elif kind == "absolute":
            found.add("job targets", status, f"{jobs} to {where}{also}, stored as an absolute path (by an older "
                      "sxctl): a copied, moved or mounted workspace would still send there; the update stores it "
                      "relative to the workspace", fixes(group))
        else:
            found.add("job targets", status, f"{jobs} to {where}{also}, a project outside this workspace "
                      f"({ws.root}): a copied, moved or mounted workspace still sends there",
                      f"nothing while {first.resolved} stays where it is; for a project moved under the workspace: "
                      + update(first.job["name"], "DIR"))


def check_crontab_blocks(found: Findings, crontab_text, crontab_file: str | None = None) -> None:
    """sxctl blocks in the user's crontab for a folder that holds no project any more (moved or
    deleted): cron runs a pass there every minute that fails, and mails it. Reported only when
    there is one (the scheduler check says whether this project's block is installed); the fix
    installs the entry in the new folder with the old one's variables and options first."""
    text = readable_crontab(crontab_text)
    if text is None:
        return
    where = f" --crontab-file {shlex.quote(crontab_file)}" if crontab_file is not None else ""
    for folder in dict.fromkeys(block_projects(text)):
        if not os.path.isdir(os.path.join(folder, SCORPIOX_DIR)):
            entry = installed_entry(text, TickCommand(Path(folder), Path(folder)))
            flags = export_flags(entry) if entry is not None else ""
            keep = "   # with the values of the old line" if flags else ""
            found.add("crontab blocks", "warn", f"your crontab runs a pass every minute in {folder}, which holds no "
                      "project any more (moved or deleted?); each one fails",
                      f"in the project's new folder: sxctl cron export --target crontab --install{where}{flags}; "
                      f"then: sxctl cron export --target crontab --uninstall{where} --project "
                      f"{shlex.quote(folder)}{keep}")


def readable_crontab(crontab_text) -> str | None:
    """The crontab's text, None when there is none or it cannot be read (the `crontab entry`
    check reports why)."""
    try:
        return crontab_text()
    except SxctlError:
        return None


def _installed_engine(ws, project, environ, crontab_text) -> str | None:
    """Which engine sxctl installed for this project: a crontab block or a systemd timer."""
    if project is None:
        return None
    tick = TickCommand(project, ws.root)
    text = readable_crontab(crontab_text)
    if text is not None and has_block(text, tick):
        return "crontab block installed"
    timer = f"{tick.unit_name}.timer"
    for system in (False, True):
        try:
            folder = systemd_unit_dir(system, environ)
        except SxctlError:  # no home folder to look in
            continue
        if (folder / timer).exists():
            enabled = (folder / "timers.target.wants" / timer).exists()
            return f"systemd timer {timer} installed" + ("" if enabled else " but not enabled")
    return None


def check_ledger(found: Findings, ws, files: tuple[dict[str, Any], Any] | None, max_log_bytes: int, environ) -> None:
    """The ledger's size against its ceiling; with the files read (`files`: the store and the
    scanned ledger), its unknown runs and the rows a comis daemon rejects."""
    try:
        size = os.stat(ws.ledger).st_size
    except FileNotFoundError:
        size = 0
    if size >= max_log_bytes:
        found.add("ledger", "fail", f"the ledger is {size} bytes, at its ceiling of {max_log_bytes}",
                  "sxctl cron tick --retain-executions 200   # keeps fewer finished runs")
    elif size >= LEDGER_WARN_SHARE * max_log_bytes:
        found.add("ledger", "warn", f"the ledger is {size} bytes, {size * 100 // max_log_bytes}% of its ceiling",
                  "sxctl cron tick --retain-executions 500")
    else:
        found.add("ledger", "ok", f"{size} of {max_log_bytes} bytes")
    store, ledger = files if files is not None else ({"jobs": []}, None)
    names = {job["id"]: job["name"] for job in store["jobs"]}
    runs = _newest_first(ledger)
    unknown = [run for run in runs if run["status"] == "unknown"]
    if unknown:
        name = names.get(unknown[0]["jobId"])
        found.add("unknown runs", "warn", f"{len(unknown)} run(s) ended unknown (never replayed); decide each",
                  f"sxctl cron runs {name} --evidence" if name else "sxctl cron runs --all-jobs --evidence")
    daemons = [d for d in daemon_locks(ws, environ) if d.owns_workspace]
    if daemons:
        dispatched = [run for run in runs if (run.get("outcome") or {}).get("kind") == "inbox_dispatch"]
        if dispatched:
            found.add("comis daemon", "fail", f"a comis daemon (pid {daemons[0].pid}) owns this workspace and the "
                      f"ledger holds {len(dispatched)} inbox_dispatch row(s) it rejects",
                      "sxctl cron handoff   # moves sxctl's ledger aside so the daemon starts clean")
        else:
            found.add("comis daemon", "warn", f"a comis daemon (pid {daemons[0].pid}) owns this workspace; "
                      "`sxctl cron tick` stays out of its way", None)


def check_failed_runs(found: Findings, files: tuple[dict[str, Any], Any], clock: Clock, ws) -> None:
    """Jobs whose last run failed (`failures.last_failures`: the job, why, and `cron runs NAME`).
    A failure of the check, so that `doctor -q`, the monitor probe, is not silent while a job
    fails every run; a warning while the job is paused, as nothing runs it until it is resumed."""
    store, ledger = files
    jobs = {job["id"]: job for job in store["jobs"]}
    for failed in last_failures(store, _newest_first(ledger), clock.now_ms()):
        job = jobs[failed["jobId"]]
        paused = job["lifecycle"]["status"] == "paused"
        # a run for the live agent not sent for want of one (given up past --hold-max): the
        # sessions' checks say the agent is gone, and its next occurrence will be sent; a
        # one-shot has none (it is lost: a failure), and a job pinned to a session fails as any other
        target = agent_target(job, ws.root, "live", workspace=ws.root)
        unsent = failed["reason"].startswith("failed precondition") and target is not None and target[1] == "live"
        lost = unsent and job["schedule"]["kind"] == "at"
        found.add("failed runs", "warn" if paused or (unsent and not lost) else "fail",
                  f"job {failed['name']}: its last run failed: {failed['reason']}"
                  + ("; the job is paused" if paused else "")
                  + ("; nothing was sent, and a one-shot has no other run" if lost
                     else "; nothing was sent" if unsent else ""),
                  failed["command"])


def _newest_first(ledger) -> list[dict[str, Any]]:
    """The ledger's runs (`project_run` rows), newest first (cron-ledger.md §4)."""
    groups = sorted((g for g in ledger.groups.values() if g.start is not None), key=lambda g: g.sort_key,
                    reverse=True) if ledger is not None else []
    return [project_run(group) for group in groups]
