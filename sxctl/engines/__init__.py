"""The engines teams already run, configured to say "now" once a minute: a crontab line, a systemd
service + timer pair, a Kubernetes CronJob. Each runs `sxctl cron tick`; sxctl stays the
at-most-once guard and the record (the store lock, claims and the ledger), so an engine that fires
twice, late or not at all never doubles a run, and a miss shows in the heartbeat and the ledger.

`--install` (crontab, systemd) is idempotent and marked: a block between two marker lines in the
crontab, unit files that start with a marker comment; `--uninstall` removes exactly those.

Every value that reaches a generated file (paths, the interpreter, a user, an image, a claim
name) passes `check_value` first: a value the target format cannot hold safely is refused (exit 2,
naming it and the target), never emitted. Each generated text is then read back the way its
engine reads it (cron's `%` rule and sh's words, systemd's unit syntax, a YAML parser) and must
give exactly the intended values, or nothing is emitted. The files sxctl reads or replaces
outside its own folders (a crontab file, unit files) go through `read_outside_file`: a regular
file or absent, never through a symlink, at most `OUTSIDE_FILE_CAP` bytes, exit 5 otherwise.

In parts: `values` (checked values, `TickCommand`), `outside` (files outside sxctl's folders),
`crontab`, `entry` (an installed crontab entry read back: what a re-install must keep),
`systemd`, `kubernetes`, and `ticklog` (the pass's own log); every name below is offered from
here.
"""


from __future__ import annotations

from .crontab import (
    Crontab,
    block_projects,
    crontab_block,
    crontab_log_path,
    has_block,
    install_crontab,
    uninstall_crontab,
)
from .entry import InstalledEntry, installed_entry, installed_unit, refuse_dropping, refuse_losing
from .kubernetes import cronjob_manifest, project_owner
from .outside import OUTSIDE_FILE_CAP, read_outside_file, refuse_owned_place, replace_outside_file
from .systemd import (
    command_line,
    disable_commands,
    enable_commands,
    install_systemd,
    read_unit,
    run_systemctl,
    stop_commands,
    systemd_links,
    systemd_unit_dir,
    systemd_units,
    uninstall_systemd,
)
from .ticklog import TickLog
from .values import MARKER, TARGETS, TickCommand, check_env

__all__ = [
    "MARKER", "OUTSIDE_FILE_CAP", "TARGETS", "Crontab", "InstalledEntry", "TickCommand", "TickLog", "block_projects",
    "check_env", "command_line", "cronjob_manifest", "crontab_block", "crontab_log_path",
    "disable_commands", "enable_commands", "has_block", "install_crontab", "install_systemd",
    "installed_entry", "installed_unit", "project_owner", "read_outside_file", "read_unit", "refuse_dropping",
    "refuse_losing", "refuse_owned_place",
    "replace_outside_file", "run_systemctl", "stop_commands", "systemd_links", "systemd_unit_dir", "systemd_units",
    "uninstall_crontab", "uninstall_systemd",
]
