"""`sxctl session list|show|which`: which sessions exist, which one a command would use."""

from __future__ import annotations

import click

from ..api.times import format_duration_ms
from .output import Group, completing, emit, in_session, reporter, say, settings, table


@click.group("session", cls=Group)
def session() -> None:
    """Find the agent's sessions and see which one sxctl would use.

    \b
    Examples:
      sxctl session list
      S=$(sxctl session which) && sxctl --session "$S" inbox list
    """


@session.command("list")
@click.option("--limit", type=click.IntRange(1), metavar="N",
              help="Only the N newest, reading only their folders (the date in a folder's name orders it first).")
def list_(limit: int | None) -> None:
    """List every session folder, newest first, with its state: live, stopped (its agent
    stopped cleanly), stale (no stats.json for 10 s) or unknown (no stats.json).

    A full scan: each folder's stats.json, callbacks.json and inbox are read (about 0.1 ms a
    folder); --limit N reads only the N newest.

    \b
    Example:
      sxctl session list --json | jq -r '.sessions[] | select(.state=="live") | .id'
    """
    from ..api import list_sessions

    s = settings()
    result = list_sessions(project=s.project, session=s.session, clock=s.clock, report=reporter(), limit=limit)
    rows = result.rows

    def human() -> None:
        if not rows:
            say(f"no sessions in {result.project}/.scorpiox/sessions")
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

    emit(result.to_json(), human)


@session.command("show")
@click.argument("session_id", metavar="[ID]", required=False, shell_complete=completing("sessions"))
def show(session_id: str | None) -> None:
    """Show one session in detail: state, paths, worktree copies, timers, inbox.

    \b
    Example:
      sxctl session show 2026_09_21_quiet_euler --json
    """
    from ..api import show_session

    where = in_session()
    where["session"] = session_id if session_id is not None else where["session"]
    result = show_session(**where)
    chosen, row = result.session, result.row
    copies = chosen.worktree_copies()
    stats = chosen.stats or {}

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
            f"inbox     {row['inbox_pending']} pending ({result.inbox_dir}), gate {result.inbox_gate}",
        ]
        if result.busy:
            lines.append("busy      a command or background task is running")
        for line in lines:
            say(line)

    emit(result.to_json(), human)


@session.command("which")
def which() -> None:
    """Print only the id of the session sxctl would use (for `S=$(sxctl session which)`).

    \b
    Example:
      sxctl --project ~/myapp session which
    """
    from ..api import which_session

    result = which_session(**in_session())
    emit(result.to_json(), lambda: say(result.session.id))
