"""`sxctl doctor`: is everything around the agent alive and sound? One verdict per check — `ok`,
`warn` or `fail` — and for every check that is not ok, the command that fixes it. Read-only."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .clock import SYSTEM_CLOCK, Clock
from .errors import SxctlError

#: a workspace with jobs and no pass for this long has no working scheduler
NO_PASS_FAIL_MS = 3 * 60_000
#: a heartbeat further ahead of this machine's clock than this was written by a clock that disagrees
CLOCK_SKEW_MS = 60_000
#: passes that found the store lock busy for this long (no pass ran) are a failed check
BUSY_FAIL_MS = 15 * 60_000
STALE_TEMP_MS = 3_600_000
LOCK_STALE_MS = 30_000
LEDGER_WARN_SHARE = 0.8


class Findings:
    def __init__(self) -> None:
        self.checks: list[dict[str, Any]] = []

    def add(self, check: str, status: str, message: str, fix: str | None = None) -> None:
        self.checks.append({"check": check, "status": status, "message": message, "fix": fix})

    def guard(self, check: str, probe: Callable[[], Any], fix: str | None = None) -> Any:
        """Run one probe and return what it returns; a file that cannot be read is that check's
        failure (with `fix`, or how to get at a file the system refuses), never a crash."""
        try:
            return probe()
        except SxctlError as error:
            refused = error.file if error.code == "os_refused" else None
            self.add(check, "fail", error.message,
                     error.extra.get("hint") or (_access_fix(refused) if refused else fix))
        except OSError as error:
            where = error.filename
            self.add(check, "fail", f"{error.strerror or error}: {where or ''}".rstrip(": "),
                     _access_fix(where) if isinstance(error, PermissionError) and where else fix)
        return None


def _access_fix(path: str | os.PathLike[str]) -> str:
    return (f"ls -ld {path}   # run sxctl as its owner (the agent's user), or give this user access "
            "(chmod u+rX as the owner)")


def diagnose(project: Path | None, session, ws, *, environ: Mapping[str, str] = os.environ,
             clock: Clock = SYSTEM_CLOCK, max_log_bytes: int = 2_000_000,
             crontab_text: Callable[[], str | None] = lambda: None) -> list[dict[str, Any]]:
    """Every check, in the order a person would look. `project`/`session`/`ws` may be None
    (not found); `crontab_text` returns the user's crontab, or None when it cannot be read."""
    found = Findings()
    now = clock.now_ms()
    if project is None:
        found.add("project", "fail", "no project here (no .scorpiox/ folder in this folder or above)",
                  "cd into the project, or pass --project DIR (sxctl agent run --init creates one)")
    else:
        found.add("project", "ok", str(project))
        found.guard("sessions", lambda: _agent(found, project, clock))
        found.guard("stranded", lambda: _stranded(found, project, clock))
    if session is not None:
        found.guard("inbox gate", lambda: _gate(found, session))
        found.guard("permissions", lambda: _permissions(found, session, ws))
        found.guard("timers", lambda: _timers(found, session))
        found.guard("history", lambda: _history(found, session))
    if ws is not None:
        found.guard("temps and locks", lambda: _temps_and_locks(found, session, ws, now))
        files = found.guard("cron files", lambda: _cron_files(found, ws, max_log_bytes))
        if files is not None:  # else: which jobs are scheduled, and which runs exist, is unknown
            found.guard("scheduler", lambda: _scheduler(found, ws, files[0], now, environ, crontab_text, project))
            found.guard("job targets", lambda: _job_targets(found, ws, files[0]))
        found.guard("ledger", lambda: _ledger(found, ws, files, max_log_bytes, environ))
    return found.checks


def _agent(found: Findings, project: Path, clock: Clock) -> None:
    from .project import freshest_live, list_sessions, several_live_warning

    sessions = list_sessions(project, clock)
    if not sessions:
        found.add("sessions", "fail", f"no session folder in {project}/.scorpiox/sessions: no agent has run here",
                  "start the agent in this project (or `sxctl agent run`)")
        return
    found.add("sessions", "ok", f"{len(sessions)} session folder(s)")
    live = freshest_live(sessions)
    several = several_live_warning(sessions)
    if live is None:
        newest = sessions[0]
        age = newest.liveness.age_ms
        if newest.state == "stopped":
            found.add("agent", "warn", f"no agent is running (the agent of session {newest.id} stopped cleanly"
                      + (f", {age // 1000}s ago)" if age is not None else ")"),
                      "start the agent; messages and due jobs wait for it")
            return
        found.add("agent", "warn", f"no live agent (newest session {newest.id}"
                  + (f", stats.json {age // 1000}s old)" if age is not None else ", no stats.json)"),
                  "start the agent; messages and due jobs wait for it")
    elif several is not None:
        found.add("agent", "warn", several,
                  "stop the agent you do not want (each reads only its own session), or pin one with "
                  "--session ID / SXCTL_SESSION in every command")
    else:
        found.add("agent", "ok", f"session {live.id} is live (stats.json {(live.liveness.age_ms or 0) // 1000}s old)")


def _stranded(found: Findings, project: Path, clock: Clock) -> None:
    """Messages and timers left in a session no agent reads while another is live (after a
    restart or a rotation): messages nobody will read fail the check (a monitor must hear of
    them); timers alone warn (a rotation may have left an edited copy behind)."""
    from .observe import stranded_sessions

    entries = stranded_sessions(project, clock)
    shown, rest = (entries, []) if len(entries) <= 5 else (entries[:4], entries[4:])
    for entry in shown:
        found.add("stranded", "fail" if entry.pending else "warn", entry.describe(), " && ".join(entry.fixes()))
    if rest:  # one line for the rest: 3,000 old sessions are one problem, not 3,000 checks
        pending, timers = sum(e.pending for e in rest), sum(e.timers for e in rest)
        found.add("stranded", "fail" if pending else "warn",
                  f"{len(rest)} more sessions hold {pending} pending message(s) and {timers} active timer(s) "
                  f"(oldest {rest[-1].id})", "sxctl status --json | jq .stranded   # lists every one")
    if not entries:
        found.add("stranded", "ok", "no session holds messages or timers while an agent runs in another")


def _gate(found: Findings, session) -> None:
    from .inbox.sending import inbox_switch
    from .report import Reporter

    if inbox_switch(session, Reporter()) == "off":
        found.add("inbox gate", "fail", "SCORPIOX_INBOX=0: the agent does not read its inbox",
                  "set SCORPIOX_INBOX=1 where the agent starts (or remove the 0), then restart it")
    else:
        found.add("inbox gate", "ok", "the agent reads its inbox")


def _permissions(found: Findings, session, ws) -> None:
    """Files the agent cannot read (another owner, and no read bit for it), folders sxctl cannot
    write."""
    from .inbox.folder import inbox_dirs

    agent_uid = os.stat(session.dir).st_uid
    unreadable = []
    for folder in [session.dir, *(inbox.path for inbox in inbox_dirs(session))]:
        try:
            entries = list(os.scandir(folder))
        except FileNotFoundError:
            continue
        for entry in entries:
            if not entry.is_file(follow_symlinks=False):
                continue
            st = entry.stat(follow_symlinks=False)
            readable = (st.st_mode & stat.S_IRUSR) if st.st_uid == agent_uid else (st.st_mode & stat.S_IROTH)
            if not readable and agent_uid != 0:
                unreadable.append(entry.path)
    if unreadable:
        found.add("permissions", "fail", f"{len(unreadable)} file(s) the agent (uid {agent_uid}) cannot read, "
                  f"e.g. {unreadable[0]}", f"chown {agent_uid} {' '.join(unreadable[:3])}")
    writable = [session.dir, *(inbox.path for inbox in inbox_dirs(session) if inbox.path.is_dir())]
    if ws is not None and ws.scheduler.is_dir():
        writable.append(ws.scheduler)
    denied = [str(folder) for folder in writable if not os.access(folder, os.W_OK)]
    if denied:
        found.add("permissions", "fail", f"sxctl cannot write {denied[0]}",
                  f"run sxctl as the agent's user (uid {agent_uid}), or `chmod u+w {denied[0]}`")
    if not unreadable and not denied:
        found.add("permissions", "ok", "the agent can read its files and sxctl can write its folders")


def _timers(found: Findings, session) -> None:
    from .callbacks.table import view_table

    try:
        view = view_table(session)
    except SxctlError as error:
        if error.code == "os_refused" and error.file is not None:  # not invalid: rewriting it cannot help
            found.add("timers", "fail", error.message, _access_fix(error.file))
            return
        found.add("timers", "fail", f"{error.message}; the agent keeps its last good table and stops firing",
                  f"sxctl callbacks cancel-all (rewrites a valid table), or fix {session.dir / 'callbacks.json'}")
        return
    found.add("timers", "ok", "callbacks.json is valid" if view.exists else "no callbacks.json (no timers)")


def _history(found: Findings, session) -> None:
    from .inbox.folder import inbox_dirs

    done = 0
    for inbox in inbox_dirs(session):
        try:
            with os.scandir(inbox.done) as entries:
                done += sum(1 for _ in entries)
        except FileNotFoundError:
            continue
    from .observe import LARGE_HISTORY

    if done > LARGE_HISTORY:
        found.add("history", "warn", f"{done} consumed messages in inbox/done/",
                  "sxctl inbox prune --older-than 30d --keep 1000")
    else:
        found.add("history", "ok", f"{done} consumed message(s) kept")


def _temps_and_locks(found: Findings, session, ws, now: int) -> None:
    from .inbox.folder import inbox_dirs

    folders = [ws.scheduler] + ([inbox.path for inbox in inbox_dirs(session)] if session is not None else [])
    stale = []
    for folder in folders:
        try:
            entries = list(os.scandir(folder))
        except FileNotFoundError:
            continue
        for entry in entries:
            if (entry.name.endswith(".tmp") and entry.is_file(follow_symlinks=False)
                    and now - entry.stat(follow_symlinks=False).st_mtime_ns // 1_000_000 > STALE_TEMP_MS):
                stale.append(entry.path)
    if stale:
        found.add("temps", "warn", f"{len(stale)} stray temp file(s) left by crashed writers, e.g. {stale[0]}",
                  "sxctl inbox clean --older-than 1h" if any("/inbox/" in p for p in stale)
                  else f"rm {' '.join(stale[:3])}  # after checking no writer is running")
    else:
        found.add("temps", "ok", "no stray temp files")
    problems = []
    for sentinel in (ws.store_sentinel, ws.ledger_sentinel):
        lockdir = Path(os.path.realpath(sentinel) + ".lock")
        try:
            age_ms = now - os.stat(lockdir).st_mtime_ns // 1_000_000
        except FileNotFoundError:
            continue
        owner = _owner_pid(Path(f"{sentinel}.owner"))
        if owner is not None and not _alive(owner):
            problems.append(f"{lockdir} is held by process {owner}, which is gone")
        elif age_ms < -CLOCK_SKEW_MS:
            problems.append(f"{lockdir} is stamped {-age_ms // 1000}s ahead of this clock (no holder refreshes a "
                            "lock ahead of time, and the 30-second rule never takes it over)")
        elif age_ms > LOCK_STALE_MS:
            problems.append(f"{lockdir} has not been refreshed for {age_ms // 1000}s")
    if problems:
        found.add("locks", "fail", "; ".join(problems),
                  "the next `sxctl cron tick` takes over a dead holder's lock; if it cannot, and no sxctl or comis "
                  f"process is running, rmdir {problems[0].split()[0]}")
    else:
        found.add("locks", "ok", "no stale lock")


def _owner_pid(note: Path) -> int | None:
    from .fsio import read_data_file

    try:
        doc = json.loads(read_data_file(note, 4096) or b"null")
    except (ValueError, SxctlError, RecursionError):
        return None
    import socket

    if isinstance(doc, dict) and doc.get("host") == socket.gethostname() and isinstance(doc.get("pid"), int):
        return doc["pid"]
    return None


def _alive(pid: int) -> bool:
    from .locks import pid_alive

    return pid_alive(pid)


def _cron_files(found: Findings, ws, max_log_bytes: int) -> tuple[dict[str, Any], Any] | None:
    """The store, sxctl's policy file and the ledger, each read and checked as a scheduler pass
    reads them (a pass stops on any of them): the store and the ledger, or None when one is invalid."""
    from .cron.views import check_files

    store, ledger, problems = check_files(ws, max_log_bytes)
    if problems:
        names = ", ".join(dict.fromkeys(os.path.basename(p.file) for p in problems))
        stops = "every scheduler pass stops on it" if os.path.lexists(ws.store) else "cron commands stop on it"
        found.add("cron files", "fail", f"{problems[0].message}; {stops}",
                  f"sxctl cron validate   # names each problem in {names}; sxctl never rewrites an invalid file: "
                  "fix it by hand or move it aside")
        return None
    found.add("cron files", "ok", "store, policy file and ledger are valid" if store is not None
              else "no cron store")
    return store or {"jobs": []}, ledger


def _scheduler(found: Findings, ws, store: dict[str, Any], now: int, environ, crontab_text, project) -> None:
    """Is a scheduler pass running? Judged from the heartbeat, which every pass writes, and only
    from a heartbeat that is a record a pass writes and whose time this clock can believe."""
    from .cron.heartbeat import FILE_NAME, read_heartbeat
    from .cron.jobs import is_overdue

    jobs = [job for job in store["jobs"] if job["lifecycle"]["status"] in ("scheduled", "one_shot_claimed")]
    beat = read_heartbeat(ws)
    path = ws.scheduler / FILE_NAME
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
        where = f"last pass {max(age, 0) // 1000}s ago on {beat['host']} ({beat['outcome']})"
        if age < -CLOCK_SKEW_MS:
            found.add("scheduler", "fail", f"the heartbeat {path} is {-age // 1000}s ahead of this clock (written "
                      f"on {beat['host']}): the clocks disagree, so no pass can be shown to run",
                      f"timedatectl status   # here and on {beat['host']}: synchronise both clocks (NTP); "
                      "the next pass rewrites the heartbeat")
        elif age > NO_PASS_FAIL_MS:
            found.add("scheduler", "fail", f"{len(jobs)} scheduled job(s) and no scheduler pass for "
                      f"{age // 60_000} minute(s); {where}",
                      ("check the installed entry: " + engine) if engine else install)
        elif beat["outcome"] == "failed":
            found.add("scheduler", "fail", f"the last pass failed: {beat['detail']}",
                      "sxctl cron tick   # run one pass by hand to see the error")
        elif beat["outcome"] == "no_store":
            found.add("scheduler", "fail", f"the last pass found no store, but {ws.store} holds {len(jobs)} "
                      f"scheduled job(s): the installed pass looks at another workspace; {where}",
                      "sxctl cron export --target crontab --install   # again, from this project")
        elif beat["outcome"] == "busy" and now - (beat.get("busySinceMs") or now) > BUSY_FAIL_MS:
            found.add("scheduler", "fail", f"every pass for {(now - beat['busySinceMs']) // 60_000} minute(s) "
                      f"found the store lock busy: a pass hangs, or a lock is left behind; {where}",
                      f"ls -la --time-style=full-iso {ws.scheduler}   # see the locks check; "
                      "stop a hung `sxctl cron tick`, or rmdir a lock no process holds")
        else:
            found.add("scheduler", "ok", where + (f"; {engine}" if engine else ""))
    overdue = [job["name"] for job in jobs if job["lifecycle"]["status"] == "scheduled" and is_overdue(job, now)]
    if overdue:
        found.add("overdue", "warn", f"overdue job(s): {', '.join(overdue[:5])}",
                  "sxctl status   # waiting for the agent, or no pass running?")


def _job_targets(found: Findings, ws, store: dict[str, Any]) -> None:
    """Does every job's target project resolve in this workspace, and will it still after a copy,
    a move or a container mount? (`cron.targets.target_problems`, resolved as dispatch resolves
    them.) A target that resolves to no project fails, and so does one that sends into the
    project this workspace was copied from, when the job would run an agent turn or a heartbeat
    now; the rest warn, each with the `cron update` that fixes it."""
    import shlex

    from .cron.targets import target_problems

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

    for kind in ("linked", "missing", "copied", "absolute", "outside"):
        group = [p for p in problems if p.kind == kind]
        if not group:
            continue
        first = group[0]
        where = f"{first.resolved}" + ("" if first.stored == str(first.resolved) else f" (stored as {first.stored!r})")
        jobs = f"job {first.job['name']} sends" if len(group) == 1 else f"{len(group)} jobs ({names(group)}) send"
        also = "" if len(group) == 1 else " (the first)"
        status = "fail" if kind in ("linked", "missing", "copied") and any(blocking(p) for p in group) else "warn"
        if kind == "linked":
            found.add("job targets", status, f"{jobs} to {where}{also}, through a symbolic link below this "
                      f"workspace ({ws.root}): a relative target must be a folder of the workspace, and a run "
                      "is refused (`precondition`) rather than sent where the link points", fixes(group))
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


def _installed_engine(ws, project, environ, crontab_text) -> str | None:
    """Which engine sxctl installed for this project: a crontab block or a systemd timer."""
    from .engines import TickCommand, has_block, systemd_unit_dir

    if project is None:
        return None
    tick = TickCommand(project, ws.root)
    text = crontab_text()
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


def _ledger(found: Findings, ws, files: tuple[dict[str, Any], Any] | None, max_log_bytes: int, environ) -> None:
    """The ledger's size against its ceiling; with the files read (`files`: the store and the
    scanned ledger), its unknown runs and the rows a comis daemon rejects."""
    from .cron.ledger import project_run
    from .cron.store import daemon_locks

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
    groups = sorted((g for g in ledger.groups.values() if g.start is not None), key=lambda g: g.sort_key,
                    reverse=True) if ledger is not None else []
    runs = [project_run(group) for group in groups]
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
