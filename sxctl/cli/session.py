"""`sxctl session list|show|which`: which sessions exist, which one a command would use."""

from __future__ import annotations

import click

from ..callbacks import read_table
from ..errors import SxctlError
from ..inbox import inbox_dirs, message_names, primary_inbox
from ..project import Session, as_session
from ..timeparse import format_duration_ms
from .output import Group, completing, current_project, current_session, emit, reporter, say, settings, table


def _callbacks_summary(folder) -> tuple[int | None, bool, str | None]:
    """(active timers, file exists, reason when the file is invalid)."""
    try:
        found = read_table(folder)
    except SxctlError as error:
        return None, True, error.message
    if found is None:
        return None, False, None
    return len(found.active_slots()), True, None


def _pending_count(session: Session) -> int:
    return sum(len(message_names(inbox.path)) for inbox in inbox_dirs(session))


def _row(session: Session) -> dict:
    active, exists, invalid = _callbacks_summary(session.dir)
    copies = session.worktree_copies()
    row = {
        "id": session.id, "dir": str(session.dir), "state": session.state,
        "updated_ms": session.liveness.updated_ms, "age_ms": session.liveness.age_ms,
        "model": (session.stats or {}).get("model"), "callbacks_active": active,
        "callbacks_file": exists, "inbox_pending": _pending_count(session),
        "copy": copies.role if copies.role != "none" else "none",
    }
    if invalid:
        row["callbacks_invalid"] = invalid
    return row


@click.group("session", cls=Group)
def session() -> None:
    """Find the agent's sessions and see which one sxctl would use.

    \b
    Examples:
      sxctl session list
      S=$(sxctl session which) && sxctl --session "$S" inbox list
    """


@session.command("list")
def list_() -> None:
    """List every session folder, newest first.

    \b
    Example:
      sxctl session list --json | jq -r '.sessions[] | select(.state=="live") | .id'
    """
    from ..project import list_sessions

    project = current_project()
    rows = [_row(as_session(info, project, "newest")) for info in list_sessions(project)]

    def human() -> None:
        if not rows:
            say(f"no sessions in {project}/.scorpiox/sessions")
            return
        table(
            ["ID", "STATE", "AGE", "MODEL", "CB", "INBOX", "COPY"],
            [
                [
                    r["id"], r["state"],
                    format_duration_ms(r["age_ms"]) if r["age_ms"] is not None else None,
                    r["model"], "!" if "callbacks_invalid" in r else r["callbacks_active"],
                    r["inbox_pending"], None if r["copy"] == "none" else r["copy"],
                ]
                for r in rows
            ],
        )

    emit({"ok": True, "project": str(project), "sessions": rows}, human)


@session.command("show")
@click.argument("session_id", metavar="[ID]", required=False, shell_complete=completing("sessions"))
def show(session_id: str | None) -> None:
    """Show one session in detail: state, paths, worktree copies, timers, inbox.

    \b
    Example:
      sxctl session show 2026_09_21_quiet_euler --json
    """
    from ..inbox import inbox_gate

    if session_id:
        settings().session = session_id
    report = reporter()
    chosen = current_session(report)
    row = _row(chosen)
    gate = inbox_gate(chosen, report)
    copies = chosen.worktree_copies()
    stats = chosen.stats or {}
    doc = {
        "ok": True, **chosen.to_json(), "project": str(chosen.project), "state": chosen.state,
        "updated_ms": chosen.liveness.updated_ms, "age_ms": chosen.liveness.age_ms,
        "worktree": copies.to_json(), "callbacks_active": row["callbacks_active"],
        "callbacks_file": row["callbacks_file"], "inbox_pending": row["inbox_pending"],
        "inbox_dir": str(primary_inbox(chosen).path), "inbox_gate": gate,
        "busy_hint": bool((stats.get("bash") or {}).get("running")
                          or (stats.get("bgtasks") or {}).get("running")),
        "stats": chosen.stats,
    }

    def human() -> None:
        cb = stats.get("callbacks") or {}
        lines = [
            f"session   {chosen.id}  (chosen by {chosen.source})",
            f"state     {chosen.state} ({chosen.liveness.describe()})",
            f"folder    {chosen.dir}",
            f"project   {chosen.project}",
            f"worktree  {copies.role}"
            + (f" (worktree {copies.worktree_dir}, mirror {copies.mirror_dir})" if copies.role != "none" else ""),
            f"model     {stats.get('model') or '-'}   branch {stats.get('branch') or '-'}",
            "timers    "
            + ("invalid callbacks.json" if "callbacks_invalid" in row
               else "no callbacks.json" if not row["callbacks_file"]
               else f"{row['callbacks_active']}/8 active")
            + (f", next in {cb.get('remaining_s')}s" if cb.get("next_fire_ms") else ""),
            f"inbox     {row['inbox_pending']} pending ({doc['inbox_dir']}), gate {gate}",
        ]
        if doc["busy_hint"]:
            lines.append("busy      a command or background task is running")
        for line in lines:
            say(line)

    emit(doc, human)


@session.command("which")
def which() -> None:
    """Print only the id of the session sxctl would use (for `S=$(sxctl session which)`).

    \b
    Example:
      sxctl --project ~/myapp session which
    """
    report = reporter()
    chosen = current_session(report)
    emit({"ok": True, **chosen.to_json(), "state": chosen.state}, lambda: say(chosen.id))


