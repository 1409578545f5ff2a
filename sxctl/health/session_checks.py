"""`doctor`'s checks of the project and its session: the agent, stranded sessions, the inbox
switch, permissions, the timer table, the inbox history, stray temps and the scheduler locks."""

from __future__ import annotations

import json
import os
import socket
import stat
from pathlib import Path

from ..callbacks.table import unpublished_edit, view_table
from ..clock import CLOCK_SKEW_MS, Clock
from ..cron.run.heartbeat import FOLDER as HEARTBEATS
from ..errors import SxctlError
from ..fsio import STRAY_TEMP_MS, read_data_file
from ..inbox.folder import inbox_dirs
from ..inbox.sending import inbox_switch
from ..locks import pid_alive
from ..observe import stranded_sessions, summary
from ..project import freshest_live, list_sessions, several_live_warning
from ..project.usage import read_usage, usage_line
from ..report import Reporter
from ..timeparse import format_duration_ms
from .findings import Findings, access_fix

LOCK_STALE_MS = 30_000


def check_agent(found: Findings, project: Path, clock: Clock) -> None:
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
                      + (f", {format_duration_ms(age)} ago)" if age is not None else ")"),
                      "start the agent; messages and due jobs wait for it")
            return
        found.add("agent", "warn", f"no live agent (newest session {newest.id}"
                  + (f", stats.json {format_duration_ms(age)} old)" if age is not None else ", no stats.json)"),
                  "start the agent; messages and due jobs wait for it")
    elif several is not None:
        found.add("agent", "warn", several,
                  "stop the agent you do not want (each reads only its own session), or pin one with "
                  "--session ID / SXCTL_SESSION in every command")
    else:
        usage = read_usage(live.stats)  # the agent's own figures, when it writes them (project/usage.py)
        said = "" if "usage" not in (live.stats or {}) else f"; usage {usage_line(usage)}"
        found.add("agent", "ok", f"session {live.id} is live (stats.json {(live.liveness.age_ms or 0) // 1000}s old"
                  f"{said})")


def check_stranded(found: Findings, project: Path, clock: Clock) -> None:
    """Messages and timers left in a session no agent reads while another is live (after a
    restart or a rotation): messages nobody will read fail the check (a monitor must hear of
    them); timers alone warn (a rotation may have left an edited copy behind)."""
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


def check_inbox_switch(found: Findings, session) -> None:
    """SCORPIOX_INBOX, the switch that turns the agent's inbox polling off (its check keeps the
    name `inbox gate` that doctor's output has always shown)."""
    if inbox_switch(session, Reporter()) == "off":
        found.add("inbox gate", "fail", "SCORPIOX_INBOX=0: the agent does not read its inbox",
                  "set SCORPIOX_INBOX=1 where the agent starts (or remove the 0), then restart it")
    else:
        found.add("inbox gate", "ok", "the agent reads its inbox")


def check_permissions(found: Findings, session, ws) -> None:
    """Files the agent cannot read (another owner, and no read bit for it), folders sxctl cannot
    write."""
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


def check_timers(found: Findings, session) -> None:
    try:
        view = view_table(session)
    except SxctlError as error:
        if error.code == "os_refused" and error.file is not None:  # not invalid: rewriting it cannot help
            found.add("timers", "fail", error.message, access_fix(error.file))
            return
        found.add("timers", "fail", f"{error.message}; the agent keeps its last good table and stops firing",
                  f"sxctl callbacks cancel-all (rewrites a valid table), or fix {session.dir / 'callbacks.json'}")
        return
    edit = unpublished_edit(session, view)
    if edit is not None:  # valid, but not the table the live agent runs
        found.add("timers", "fail", edit.message, edit.fix)
        return
    found.add("timers", "ok", "callbacks.json is valid" if view.exists else "no callbacks.json (no timers)")


def check_history(found: Findings, session) -> None:
    done = 0
    for inbox in inbox_dirs(session):
        try:
            with os.scandir(inbox.done) as entries:
                done += sum(1 for _ in entries)
        except FileNotFoundError:
            continue
    if done > summary.LARGE_HISTORY:
        found.add("history", "warn", f"{done} consumed messages in inbox/done/",
                  "sxctl inbox prune --older-than 30d --keep 1000")
    else:
        found.add("history", "ok", f"{done} consumed message(s) kept")


def check_deadlines(found: Findings, project: Path, clock: Clock) -> None:
    """Messages unread past their --read-within, or past their --expires and not yet withdrawn
    (inbox/lifetimes.py: what `status` lists, in the same words)."""
    from ..inbox.expiry import lifetime_problems, survey

    seen = survey(project, clock.now_ms(), clock)
    for problem in lifetime_problems(seen):
        found.add("message deadlines", "warn", problem["message"], problem["fix"])
    if not seen.overdue and not seen.expired_pending and not seen.expired_recent and not seen.unreadable:
        found.add("message deadlines", "ok", f"{seen.tracked} pending message(s) with a deadline or expiry, none late")


def check_temps_and_locks(found: Findings, session, ws, now: int) -> None:
    folders = [ws.scheduler, ws.scheduler / HEARTBEATS] + (
        [inbox.path for inbox in inbox_dirs(session)] if session is not None else [])
    stale = []
    for folder in folders:
        try:
            entries = list(os.scandir(folder))
        except FileNotFoundError:
            continue
        for entry in entries:
            try:
                if (entry.name.endswith(".tmp") and entry.is_file(follow_symlinks=False)
                        and now - entry.stat(follow_symlinks=False).st_mtime_ns // 1_000_000 > STRAY_TEMP_MS):
                    stale.append(entry.path)
            except FileNotFoundError:  # a writer renamed it meanwhile: not stray (doctor failed beside a pass)
                continue
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
        if owner is not None and not pid_alive(owner):
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
    try:
        doc = json.loads(read_data_file(note, 4096) or b"null")
    except (ValueError, SxctlError, RecursionError):
        return None
    if isinstance(doc, dict) and doc.get("host") == socket.gethostname() and isinstance(doc.get("pid"), int):
        return doc["pid"]
    return None
