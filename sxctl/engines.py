"""The engines teams already run, configured to say "now" once a minute: a crontab line, a systemd
service + timer pair, a Kubernetes CronJob. Each runs `sxctl cron tick`; sxctl stays the
at-most-once gate and the record (the store lock, claims and the ledger), so an engine that fires
twice, late or not at all never doubles a run, and a miss shows in the heartbeat and the ledger.

`--install` (crontab, systemd) is idempotent and marked: a block between two marker lines in the
crontab, unit files that start with a marker comment; `--uninstall` removes exactly those.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from . import __version__
from .errors import NotFoundError, SxctlError, SystemRefusedError, UsageError
from .fsio import atomic_write

TARGETS = ("crontab", "systemd", "kubernetes")
MARKER = "managed by `sxctl cron export --install`"


@dataclass
class TickCommand:
    """What every engine runs: this installation's interpreter, the project, the workspace."""

    project: Path
    workspace: Path
    python: str = field(default_factory=lambda: os.path.abspath(sys.executable))

    @property
    def slug(self) -> str:
        """A name for this project's units and jobs: the folder name and a short hash of the path
        (two checkouts called `app` get two timers)."""
        base = re.sub(r"[^a-z0-9]+", "-", self.project.name.lower()).strip("-")[:30] or "project"
        return f"{base}-{hashlib.sha256(str(self.project).encode()).hexdigest()[:8]}"

    @property
    def unit_name(self) -> str:
        """The name of this project's systemd units and Kubernetes CronJob."""
        return f"sxctl-tick-{self.slug}"

    def argv(self, python: str | None = None) -> list[str]:
        args = [python or self.python, "-m", "sxctl", "--project", str(self.project)]
        if self.workspace != self.project:
            args += ["--workspace", str(self.workspace)]
        return [*args, "cron", "tick", "--busy-ok", "-q"]


# --- crontab -------------------------------------------------------------------------------------

def _cron_escape(text: str) -> str:
    """cron turns an unescaped `%` into a newline."""
    return text.replace("%", "\\%")


def crontab_block(tick: TickCommand) -> str:
    log_dir = "${XDG_STATE_HOME:-$HOME/.local/state}/sxctl"
    command = (f'mkdir -p "{log_dir}" && cd {shlex.quote(str(tick.project))} && '
               f'{shlex.join(tick.argv())} >> "{log_dir}/tick-{tick.slug}.log" 2>&1')
    return (f"{_block_begin(tick)}{MARKER}; remove with --uninstall)\n"
            f"# every minute: one scheduler pass, logged under $XDG_STATE_HOME/sxctl (default ~/.local/state)\n"
            f"* * * * * {_cron_escape(command)}\n"
            f"# END sxctl cron tick for {tick.project}\n")


def _block_begin(tick: TickCommand) -> str:
    return f"# BEGIN sxctl cron tick for {tick.project} ("


def has_block(text: str, tick: TickCommand) -> bool:
    """Whether a crontab's text holds sxctl's block for this project."""
    return _block_begin(tick) in text


def _block_span(text: str, tick: TickCommand) -> tuple[int, int] | None:
    begin = _block_begin(tick)
    end = f"# END sxctl cron tick for {tick.project}\n"
    start = text.find(begin)
    if start == -1 or (start > 0 and text[start - 1] != "\n"):
        return None
    stop = text.find(end, start)
    if stop == -1:
        raise SxctlError(f"the crontab has the start of sxctl's block for {tick.project} but not its end; "
                         "fix it with `crontab -e`", code="invalid_data")
    return start, stop + len(end)


class Crontab:
    """The user's crontab through crontab(1), or a crontab file given instead (a file for
    /etc/cron.d-style setups, or a test)."""

    def __init__(self, file: Path | None = None) -> None:
        self.file = file

    def read(self) -> str:
        if self.file is not None:
            try:
                return self.file.read_text()
            except FileNotFoundError:
                return ""
        done = self._crontab("-l")
        if done.returncode != 0:
            if "no crontab" in done.stderr:
                return ""
            raise SxctlError(f"crontab -l failed: {done.stderr.strip()}", code="internal")
        return done.stdout

    def write(self, text: str) -> None:
        if self.file is not None:
            atomic_write(self.file, text.encode(), keep_mode=True)
            return
        done = self._crontab("-", text)
        if done.returncode != 0:
            raise SxctlError(f"crontab - failed: {done.stderr.strip()}", code="internal")

    @staticmethod
    def _crontab(arg: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(["crontab", arg], input=stdin, capture_output=True, text=True, timeout=30)
        except FileNotFoundError:
            raise NotFoundError("crontab(1) is not installed here; install cron, or use --target systemd "
                                "(or --crontab-file FILE)", code="file_not_found") from None



def install_crontab(tick: TickCommand, crontab: Crontab) -> bool:
    """Put sxctl's block in the crontab (replacing an older one); False when it was there as is."""
    text = crontab.read()
    block = crontab_block(tick)
    span = _block_span(text, tick)
    if span is not None:
        if text[span[0]:span[1]] == block:
            return False
        new = text[:span[0]] + block + text[span[1]:]
    else:
        new = text + ("\n" if text and not text.endswith("\n") else "") + block
    crontab.write(new)
    return True


def uninstall_crontab(tick: TickCommand, crontab: Crontab) -> bool:
    text = crontab.read()
    span = _block_span(text, tick)
    if span is None:
        return False
    crontab.write(text[:span[0]] + text[span[1]:])
    return True


# --- systemd -------------------------------------------------------------------------------------

def _systemd_quote(arg: str) -> str:
    """A word of ExecStart=: quoted when needed, `%` and `$` escaped (specifiers, variables)."""
    arg = arg.replace("%", "%%").replace("$", "$$")
    return arg if re.fullmatch(r"[A-Za-z0-9_@%+=:,./-]+", arg) else '"' + arg.replace("\\", "\\\\").replace(
        '"', '\\"') + '"'


def systemd_units(tick: TickCommand, *, system: bool = False, user: str | None = None) -> dict[str, str]:
    """`{file name: content}` of the service and its timer."""
    name = tick.unit_name
    header = f"# sxctl scheduler pass for {tick.project} ({MARKER})\n"
    service = (
        header
        + "[Unit]\n"
        f"Description=sxctl scheduler pass for {tick.project}\n\n"
        "[Service]\n"
        "Type=oneshot\n"
        f"WorkingDirectory={str(tick.project).replace('%', '%%')}\n"  # the rest of the line, unquoted
        f"ExecStart={' '.join(_systemd_quote(arg) for arg in tick.argv())}\n"
        + (f"User={user}\n" if system and user else "")
    )
    timer = (
        header
        + "[Unit]\n"
        f"Description=sxctl scheduler pass for {tick.project}, every minute\n\n"
        "[Timer]\n"
        "OnCalendar=minutely\n"
        "AccuracySec=1s\n"
        "Persistent=true\n"
        f"Unit={name}.service\n\n"
        "[Install]\n"
        "WantedBy=timers.target\n"
    )
    return {f"{name}.service": service, f"{name}.timer": timer}


def systemd_unit_dir(system: bool, environ=os.environ) -> Path:
    if system:
        return Path("/etc/systemd/system")
    config = environ.get("XDG_CONFIG_HOME") or os.path.join(environ.get("HOME") or os.path.expanduser("~"), ".config")
    return Path(config) / "systemd" / "user"


def enable_command(tick: TickCommand, system: bool) -> str:
    scope = "" if system else " --user"
    return (f"systemctl{scope} daemon-reload && systemctl{scope} enable --now {tick.unit_name}.timer")


def install_systemd(units: dict[str, str], folder: Path) -> list[Path]:
    """Write the unit files (0644: systemd reads them as another user); the ones changed."""
    changed = []
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise SystemRefusedError.from_os_error(error, f"cannot create {folder}") from None
    for name, text in units.items():
        path = folder / name
        try:
            if path.read_text() == text:
                continue
            if MARKER not in path.read_text():
                raise SxctlError(f"{path} exists and was not written by sxctl; not replaced", code="name_taken")
        except FileNotFoundError:
            pass
        atomic_write(path, text.encode())
        os.chmod(path, 0o644)
        changed.append(path)
    return changed


def uninstall_systemd(units: dict[str, str], folder: Path) -> list[Path]:
    """Remove the unit files sxctl wrote (the marker says so); the ones removed."""
    removed = []
    for name in units:
        path = folder / name
        try:
            if path.is_symlink() or MARKER not in path.read_text():
                continue
        except FileNotFoundError:
            continue
        path.unlink()
        removed.append(path)
    return removed


# --- Kubernetes ----------------------------------------------------------------------------------

def _yaml_string(text: str) -> str:
    """A YAML double-quoted scalar (JSON's string syntax is valid YAML)."""
    import json

    return json.dumps(text)


def cronjob_manifest(tick: TickCommand, *, image: str, pvc: str, mount: str, uid: int, gid: int) -> str:
    """A batch/v1 CronJob that runs one pass a minute in a pod that mounts the project."""
    if not mount.startswith("/"):
        raise UsageError(f"--mount {mount!r} must be an absolute path in the container")
    project = mount.rstrip("/") or "/"
    args = ["sxctl", "--project", project, "cron", "tick", "--busy-ok", "-q"]
    name = tick.unit_name[:52]
    non_root = "\n            runAsNonRoot: true" if uid != 0 else ""
    return f"""\
# sxctl scheduler pass for {tick.project}, every minute (sxctl cron export --target kubernetes).
# The project folder is on the volume {pvc!r}, mounted at {project}. Kubernetes may start a Job
# twice or not at all; sxctl's store lock and claims keep every run at most once, and a missed
# minute shows in `sxctl doctor` (the heartbeat) and in the ledger.
apiVersion: batch/v1
kind: CronJob
metadata:
  name: {name}
  labels:
    app.kubernetes.io/name: sxctl-tick
    app.kubernetes.io/version: {_yaml_string(__version__)}
spec:
  schedule: "* * * * *"
  timeZone: "Etc/UTC"
  concurrencyPolicy: Forbid      # one pass at a time (sxctl's lock would refuse the second anyway)
  startingDeadlineSeconds: 50    # a pass that cannot start within the minute is skipped, not queued
  successfulJobsHistoryLimit: 3
  failedJobsHistoryLimit: 3
  jobTemplate:
    spec:
      backoffLimit: 0            # a failed pass is not retried: the next minute's pass comes
      activeDeadlineSeconds: 600
      template:
        spec:
          restartPolicy: Never
          securityContext:       # the owner of the agent's files (sxctl writes 0600 files)
            runAsUser: {uid}
            runAsGroup: {gid}
            fsGroup: {gid}{non_root}
          containers:
            - name: sxctl-tick
              image: {_yaml_string(image)}
              command: [{", ".join(_yaml_string(arg) for arg in args)}]
              volumeMounts:
                - name: project
                  mountPath: {_yaml_string(project)}
          volumes:
            - name: project
              persistentVolumeClaim:
                claimName: {_yaml_string(pvc)}
"""


def project_owner(project: Path) -> tuple[int, int]:
    """The uid/gid that own the agent's files (its `.scorpiox/`, else the project folder)."""
    for path in (project / ".scorpiox", project):
        try:
            st = os.stat(path)
        except OSError:
            continue
        return st.st_uid, st.st_gid
    return os.getuid(), os.getgid()
