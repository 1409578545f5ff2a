"""`sxctl doctor`: one line per check, ok/warn/fail, with the command that fixes each problem."""

from __future__ import annotations

import click

from .output import Command, emit, say, settings


@click.command("doctor", cls=Command)
@click.option("--max-log-bytes", type=int, metavar="N", help="Ledger byte ceiling (default 2,000,000).")
@click.option("--crontab-file", type=click.Path(dir_okay=False), metavar="FILE",
              help="Read this file as the crontab (as `cron export --crontab-file` writes it), not `crontab -l`.")
@click.option("--strict", is_flag=True, help="A warning fails too (exit 9): a message unread past its "
              "--read-within, no live agent, …")
def doctor_command(max_log_bytes, crontab_file, strict) -> None:
    """Check that everything around the agent is alive: project, agent, messages and timers
    stranded in a session no agent reads, permissions, temps and locks, the cron files as a pass
    reads them, the scheduler's heartbeat and installed entry, job targets that no longer resolve
    (a moved or copied project), overdue and unknown runs, jobs whose last run failed, the ledger,
    a comis daemon, messages unread past their --read-within. Exit 9 when a check fails (or, with
    --strict, warns) (a monitor runs `sxctl doctor -q`: silent while
    nothing fails, else the failing checks, each with its fix).

    \b
    Examples:
      sxctl doctor
      sxctl doctor --json | jq '.checks[] | select(.status != "ok")'
      sxctl doctor --strict -q      # in CI: any warning fails
    """
    from ..api import doctor

    s = settings()
    report = doctor(session=s.session, project=s.project, workspace=s.workspace, max_log_bytes=max_log_bytes,
                      crontab_file=crontab_file, clock=s.clock, strict=strict)

    def human() -> None:
        shown = report.failed if s.quiet else report.checks
        if not shown:
            return
        width = max(len(c["check"]) for c in shown)
        for check in shown:
            say(f"{check['status'].upper() if check['status'] != 'ok' else 'ok':5} {check['check']:{width}}  "
                f"{check['message']}")
            if check["fix"] and check["status"] != "ok":
                say(f"{'':5} {'':{width}}  fix: {check['fix']}")

    if not report.failed:
        emit(report.to_json(), human)
        return
    if not s.json:
        human()
    report.raise_if_failed()
