"""`doctor`'s check of the installed crontab entry: is sxctl's line for this project the one
`cron export` writes now? A line edited by hand, written by an older sxctl or by another
installation (another interpreter), or one with a pass option export cannot write, is a warning
naming what differs, with the export that writes it again keeping the line's own variables and
options (`engines.installed_entry`)."""

from __future__ import annotations

import os
import shlex
from dataclasses import replace

from ..engines import InstalledEntry, TickCommand, crontab_block, installed_entry, refuse_owned_place
from ..errors import UsageError
from .findings import Findings


def export_flags(entry: InstalledEntry) -> str:
    """The options `cron export` needs to write `entry` again, as a person reads them: a
    variable's value and a ping URL's path left out (`--env NAME=…`, `https://hc-ping.com/…`:
    secrets live there; `crontab -l` shows them), paths quoted."""
    from ..cron.run.pings import mask_url  # urllib loads only for pings

    shown = []
    for flag, value in entry.carried_flags():
        if flag == "--env":
            shown.append(f"--env {value.partition('=')[0]}=…")
        else:
            shown.append(f"{flag} {mask_url(value) if flag == '--ping-url' else shlex.quote(value)}")
    return "".join(f" {word}" for word in shown)


def check_crontab_entry(found: Findings, ws, project, crontab_text, crontab_file: str | None = None) -> None:
    """One `crontab entry` verdict when the crontab doctor reads (`--crontab-file`, else
    `crontab -l`) holds sxctl's block for this project: ok when it is what export writes now with
    the entry's own `--env`, `--ping-url`, `--metrics-file` and `--log`, else a warning saying what
    differs. Nothing without such a block."""
    now = TickCommand(project, ws.root) if project is not None else None
    text = crontab_text() if now is not None else None
    entry = installed_entry(text, now) if now is not None and text is not None else None
    if now is None or entry is None:
        return
    where = f" --crontab-file {shlex.quote(crontab_file)}" if crontab_file is not None else ""
    install = f"sxctl cron export --target crontab --install{where}{export_flags(entry)}"
    if not entry.readable:
        found.add("crontab entry", "warn", f"the installed crontab entry for {project} is not a line sxctl writes "
                  "(edited by hand?): what it runs is not checked", f"{install}   # writes it again")
        return
    if _owned_place(found, entry, project, where):
        return
    try:
        intended = crontab_block(entry.kept(now))
    except UsageError as error:  # a value every pass refuses too (an invalid --env SXCTL_HOST): exit 2 each minute
        found.add("crontab entry", "warn", f"the installed crontab entry for {project} could not be written again: "
                  f"{error.message}", f"{install}   # with the value it names corrected (crontab -l shows it)")
        return
    if entry.block == intended:
        found.add("crontab entry", "ok", "the installed crontab entry is what `sxctl cron export` writes")
        return
    differs = []
    if entry.python != now.python:
        gone = "" if os.path.exists(entry.python or "") else ", which is not there any more"
        differs.append(f"it runs {entry.python}{gone}, and this sxctl is {now.python}")
    if (entry.workspace or str(project)) != str(ws.root):
        differs.append(f"it runs the pass for the workspace {entry.workspace or project}, not {ws.root}")
    if entry.foreign:
        differs.append(f"it has {', '.join(entry.foreign)}, which cron export cannot write")
    if not differs:
        differs.append("its words are not the ones this sxctl's export writes (an older sxctl's line?)")
    fix = f"{install}   # keeps its variables and options" + (" (copy the values from the installed line first)"
                                                              if entry.env or entry.ping_url else "")
    if entry.foreign:
        fix = (f"keep the line as it is, or drop what export cannot write: sxctl cron export --target crontab "
               f"--uninstall{where} && {fix}")
    found.add("crontab entry", "warn", f"the installed crontab entry for {project} differs from what `sxctl cron "
              f"export --target crontab` writes now: {'; '.join(differs)}", fix)


def _owned_place(found: Findings, entry: InstalledEntry, project, where: str) -> bool:
    """A `--metrics-file` or `--log` edited into the line inside a .scorpiox/ or .scheduler/ folder
    (export refuses to write one there: `refuse_owned_place`): a warning whose fix names another
    file or drops it, True; False when there is none."""
    for flag, field in (("--metrics-file", "metrics_file"), ("--log", "log")):
        path = getattr(entry, field)
        try:
            if path is not None:
                refuse_owned_place(path, f"the entry's {flag}", "")
        except UsageError:
            kept = replace(entry, metrics_file=None) if field == "metrics_file" else replace(entry, log=None)
            copy = " (copy the values from the installed line first)" if entry.env or entry.ping_url else ""
            found.add("crontab entry", "warn", f"the installed crontab entry for {project} has {flag} "
                      f"{shlex.quote(path)}, inside a .scorpiox/ or .scheduler/ folder, whose files the agent and the "
                      "scheduler own (cron export refuses it)",
                      f"sxctl cron export --target crontab --uninstall{where} && sxctl cron export --target crontab "
                      f"--install{where}{export_flags(kept)} {flag} FILE   # FILE outside those folders, or leave "
                      f"{flag} out{copy}")
            return True
    return False
