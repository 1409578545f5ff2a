"""Running the scheduler pass on the engines teams already use (crontab, systemd, Kubernetes:
`cron export`), and handing a workspace over to a comis daemon (`cron handoff`)."""

from __future__ import annotations

import os
import pwd
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .. import engines
from ..clock import SYSTEM_CLOCK, Clock
from ..cron.run.pings import check_ping_url
from ..cron.store.handoff import hand_off_workspace
from ..errors import ConflictError, ErrorCode, SxctlError, SystemRefusedError, UsageError
from ..record import Factory, record
from ..report import Reporter
from ..version import __version__
from .scope import find_workspace, reporter, target_project


@record
class SchedulerExport:
    """`cron export`: the configuration for one engine (`files`: name -> text), and what
    `--install` / `--uninstall` changed: `enable` is the command that enables installed systemd
    units, `stop` the one that stops a timer whose files `--uninstall` removed, `ran` the
    systemctl commands `--now` ran (None: none was run)."""

    target: str
    files: dict[str, str]
    enable: str | None = None
    action: str | None = None  # installed | uninstalled | unchanged
    changed: list[str] = Factory(list)  # type: ignore[assignment]
    stop: str | None = None
    ran: list[str] | None = None

    @property
    def text(self) -> str:
        return "\n".join(self.files.values()) if self.target != "systemd" else "\n".join(
            f"# --- {name}\n{text}" for name, text in self.files.items())

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, "target": self.target, "files": self.files, "enable": self.enable,
                "action": self.action, "changed": self.changed, "stop": self.stop, "ran": self.ran}


def export_scheduler(
    target: str,
    *,
    install: bool = False,
    uninstall: bool = False,
    now: bool = False,
    system: bool = False,
    user: str | None = None,
    image: str | None = None,
    pvc: str = "sxctl-project",
    mount: str = "/project",
    crontab_file: str | os.PathLike | None = None,
    unit_dir: str | os.PathLike | None = None,
    env: Mapping[str, str] | Iterable[tuple[str, str]] = (),
    ping_url: str | None = None,
    metrics_file: str | os.PathLike | None = None,
    log: str | os.PathLike | None = None,
    workspace=None,
    project=None,
    session: str | None = None,
    environ: Mapping[str, str] = os.environ,
) -> SchedulerExport:
    """The configuration that runs `sxctl cron tick` every minute for this project on `target`
    (`crontab`, `systemd`, `kubernetes`), with this installation's interpreter, the `env`
    variables (NAME -> VALUE) and the pass's `ping_url`, `metrics_file` and `log` (`cron tick`'s
    options; the files for crontab and systemd); with `install` (crontab, systemd) put in place
    idempotently — a crontab entry or systemd unit that has variables or options this one lacks is
    kept, exit 2 (`engines.refuse_dropping`, `engines.refuse_losing`) —, with `uninstall` removed
    exactly (systemd: with the links `systemctl enable` made); with `now` (systemd) also enabled,
    or disabled first, by systemctl when there is one."""
    if target not in engines.TARGETS:
        raise UsageError(f"unknown --target {target!r}: one of {', '.join(engines.TARGETS)}")
    if install and uninstall:
        raise UsageError("--install and --uninstall cannot be combined")
    if (install or uninstall) and target == "kubernetes":
        raise UsageError("--install is for crontab and systemd; apply the CronJob with `kubectl apply -f -`")
    if now and target != "systemd":
        raise UsageError("--now is for --target systemd (a crontab entry runs from the minute it is installed)")
    if now and not (install or uninstall):
        raise UsageError("--now goes with --install or --uninstall")
    for option, given in (("--crontab-file", crontab_file), ("--unit-dir", unit_dir), ("--metrics-file", metrics_file),
                          ("--log", log)):
        if given is not None and not os.fspath(given):
            raise UsageError(f"{option} is empty: name a path (sxctl never guesses the working folder)")
    variables = engines.check_env(env.items() if isinstance(env, Mapping) else env, target)
    metrics_path, log_path = _pass_files(target, metrics_file, log)
    if ping_url is not None:
        check_ping_url(ping_url)
    if uninstall and target == "crontab" and project is not None and workspace is None:
        gone = Path(os.path.realpath(project))
        if not os.path.isdir(os.path.join(gone, ".scorpiox")):  # moved or deleted: its block can still go
            return _crontab(engines.TickCommand(gone, gone), install=False, uninstall=True, crontab_file=crontab_file)
    ws = find_workspace(workspace, project=project, session=session)
    tick = engines.TickCommand(target_project(ws, project, session=session), ws.root, env=variables,
                               ping_url=ping_url, metrics_file=metrics_path, log=log_path)
    if target == "crontab":
        if tick.log is None:  # the entry's default log, as sh expands it here (--log: checked above)
            engines.refuse_owned_place(engines.crontab_log_path(tick, environ), "the crontab entry's log",
                                       "set HOME or XDG_STATE_HOME to a folder outside any such folder")
        return _crontab(tick, install=install, uninstall=uninstall, crontab_file=crontab_file)
    if target == "systemd":
        return _export_systemd(tick, install=install, uninstall=uninstall, now=now, system=system, user=user,
                               unit_dir=unit_dir, environ=environ)
    uid, gid = engines.project_owner(tick.project)
    manifest = engines.cronjob_manifest(tick, image=image or f"sxctl:{__version__}", pvc=pvc, mount=mount,
                                        uid=uid, gid=gid)
    return SchedulerExport(target, {"cronjob.yaml": manifest})


def _pass_files(target: str, metrics_file: str | os.PathLike | None, log: str | os.PathLike | None
                ) -> tuple[str | None, str | None]:
    """`--metrics-file` and `--log` of the exported pass, absolute (the pass runs elsewhere),
    never inside a .scorpiox/ or .scheduler/ folder (exit 2); not for a pod, whose files go with it."""
    found: list[str | None] = []
    for option, given, what in (("--metrics-file", metrics_file, "the metrics"), ("--log", log, "the log")):
        if given is not None and target == "kubernetes":
            raise UsageError(f"{option} is for --target crontab and systemd: a pod's files go with it (its output "
                             "is in `kubectl logs`)")
        if given is not None:
            engines.refuse_owned_place(given, what, "name a file outside any such folder")
        found.append(os.path.abspath(given) if given is not None else None)
    return found[0], found[1]


def _crontab(tick, *, install: bool, uninstall: bool, crontab_file: str | os.PathLike | None) -> SchedulerExport:
    """The crontab half of `export_scheduler`: the block, and `--install` (refused when it would
    drop what the installed entry has: `engines.refuse_dropping`) / `--uninstall`."""
    result = SchedulerExport("crontab", {"crontab": engines.crontab_block(tick)})
    crontab = engines.Crontab(Path(os.path.abspath(crontab_file)) if crontab_file is not None else None)
    if crontab_file is not None and (install or uninstall):
        engines.refuse_owned_place(crontab_file, "the crontab", "name a crontab file of your own")
    if install or uninstall:
        done = engines.install_crontab(tick, crontab, lambda text: engines.refuse_dropping(text, tick)) if install \
            else engines.uninstall_crontab(tick, crontab)
        result.action = ("installed" if install else "uninstalled") if done else "unchanged"
        result.changed = [str(crontab.file or "crontab")] if done else []
    return result


def _export_systemd(tick, *, install: bool, uninstall: bool, now: bool, system: bool, user: str | None,
                    unit_dir: str | os.PathLike | None, environ: Mapping[str, str]) -> SchedulerExport:
    """The systemd half of `export_scheduler`: the units, the command that enables them where
    they are written, and `--install`/`--uninstall` (with `--now`, systemctl run)."""
    if user is not None and not user:
        raise UsageError("--user '' names no user: give a user name, or leave --user out for the project's owner")
    owner = user or (_owner_name(tick.project) if system else None)
    units = engines.systemd_units(tick, system=system, user=owner)
    folder = Path(os.path.abspath(unit_dir)) if unit_dir is not None else engines.systemd_unit_dir(system, environ)
    if install or uninstall:
        engines.refuse_owned_place(folder, "the unit files", "name a folder systemd reads (--unit-dir)")
    enable = engines.enable_commands(tick, system, folder, environ)
    result = SchedulerExport("systemd", units, engines.command_line(enable))
    if install:
        service = folder / f"{tick.unit_name}.service"
        installed = engines.read_outside_file(service)
        if installed is not None:  # keep what the installed unit has, as the crontab target does
            engines.refuse_losing(engines.installed_unit(installed.decode("utf-8", "replace"), tick),
                                  tick, f"the installed unit {service}", "systemd")
        result.changed = [str(p) for p in engines.install_systemd(units, folder)]
        result.action = "installed" if result.changed else "unchanged"
        if now:
            result.ran = _run(enable, environ, f"the unit files are in {folder}; enable them with: {result.enable}")
        return result
    if uninstall:
        result.enable = None
        links = engines.systemd_links(tick, folder, system, environ)
        timer = folder / f"{tick.unit_name}.timer"
        if now and (links or engines.MARKER.encode() in (engines.read_outside_file(timer) or b"")):
            result.ran = _run(engines.disable_commands(tick, system), environ,
                              "nothing was removed (without --now the files and links are removed and the "
                              "command that stops the timer is printed)")
            links = engines.systemd_links(tick, folder, system, environ)  # what disable left (or all of them)
        result.changed = [str(p) for p in engines.uninstall_systemd(units, folder, links)]
        result.action = "uninstalled" if result.changed else "unchanged"
        if result.changed:
            stop = engines.stop_commands(tick, system)
            if result.ran is not None:
                result.ran += engines.run_systemctl(stop[1:], environ) or []  # the timer is stopped: forget it
            else:
                result.stop = engines.command_line(stop, "; ")
    return result


def _run(commands: list[list[str]], environ: Mapping[str, str], then: str) -> list[str] | None:
    """engines.run_systemctl, its failure saying what state it left (`then`)."""
    try:
        return engines.run_systemctl(commands, environ)
    except SystemRefusedError as error:
        raise SystemRefusedError(f"{error.message}; {then}", **error.extra) from None


def _owner_name(project: Path) -> str:
    uid, _ = engines.project_owner(project)
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


@record
class Handoff:
    """`cron handoff`: the ledger moved aside for a comis daemon (never deleted), each job the
    daemon runs differently from sxctl (`policy_loss`: `{name, job_id, settings: [{setting,
    comis}]}`), the jobs paused in the store for it, and notes on the workspace's settings."""

    workspace: Path
    ledger: Path
    moved_to: Path | None
    policy_loss: list[dict[str, Any]] = Factory(list)  # type: ignore[assignment]
    paused: list[str] = Factory(list)  # type: ignore[assignment]
    notes: list[str] = Factory(list)  # type: ignore[assignment]

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, "workspace": str(self.workspace), "ledger": str(self.ledger),
                "moved_to": str(self.moved_to) if self.moved_to else None, "policy_loss": self.policy_loss,
                "paused": self.paused, "notes": self.notes}


def hand_off(*, accept_policy_loss: bool = False, pause_affected: bool = False, workspace=None, project=None,
             session: str | None = None, lock_wait: float = 10.0, crontab_file: str | os.PathLike | None = None,
             clock: Clock = SYSTEM_CLOCK, report: Reporter | None = None,
             environ: Mapping[str, str] = os.environ) -> Handoff:
    """Hand the workspace to a comis daemon: refused while a claim is active, and while a job
    would run differently under comis (sxctl's policy file holds it back: exit 4 `policy_loss`,
    each named) unless `accept_policy_loss`, or `pause_affected` pauses those jobs in the store
    first; the ledger (whose `inbox_dispatch` rows comis rejects) moves aside under a dated name,
    so the daemon starts clean. Refused too (exit 4 `pass_installed`) while the crontab sxctl can
    read (`crontab_file`, else `crontab -l`) holds this workspace's `cron tick` entry; once done,
    sxctl's passes refuse to run here (`.scheduler/sxctl-handed-off.json`)."""
    ws = find_workspace(workspace, project=project, session=session)
    _refuse_if_pass_installed(engines.TickCommand(target_project(ws, project, session=session), ws.root),
                              crontab_file, reporter(report))
    done = hand_off_workspace(ws, accept_policy_loss=accept_policy_loss, pause_affected=pause_affected, clock=clock,
                              lock_wait_s=lock_wait, environ=environ, report=report)
    return Handoff(ws.root, ws.ledger, done.moved_to, done.losses, done.paused, done.notes)


def _refuse_if_pass_installed(tick: engines.TickCommand, crontab_file: str | os.PathLike | None,
                              report: Reporter) -> None:
    """sxctl's `cron tick` entry for this workspace, still in the crontab (the one doctor reads),
    would go on writing a ledger the daemon rejects. A crontab that cannot be read is not checked
    (the passes refuse to run after the hand-off anyway): said, unless no crontab(1) is here."""
    where = f" --crontab-file {shlex.quote(os.fspath(crontab_file))}" if crontab_file is not None else ""
    try:
        text = engines.Crontab(Path(os.path.abspath(crontab_file)) if crontab_file is not None else None).read()
    except SxctlError as error:
        if crontab_file is not None or error.code != ErrorCode.FILE_NOT_FOUND:
            report.warn(f"the crontab could not be read ({error.message}), so whether sxctl's `cron tick` entry is "
                        f"still installed was not checked: remove it (`sxctl cron export --target crontab "
                        f"--uninstall{where}`), or its passes refuse every minute")
        return
    if engines.has_block(text, tick):
        raise ConflictError(
            f"sxctl's `cron tick` entry for {tick.project} is installed in the crontab"
            f"{f' {os.fspath(crontab_file)}' if crontab_file is not None else ''}: its passes would go on writing a "
            "ledger the comis daemon rejects; nothing was changed: remove it first with `sxctl cron export "
            f"--target crontab --uninstall{where}`, then hand off",
            code=ErrorCode.PASS_INSTALLED, file=crontab_file)
