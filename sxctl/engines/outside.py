"""The files sxctl reads or replaces outside its own folders (a crontab file, unit files, the
pass's log and metrics textfile): never inside the agent's or the scheduler's folders (exit 2),
a regular file or absent, never through a symlink, at most `OUTSIDE_FILE_CAP` bytes, exit 5
otherwise; and the XDG folders they live in."""

from __future__ import annotations

import os
import pwd
import stat
from collections.abc import Mapping
from pathlib import Path

from ..errors import InvalidDataError, SystemRefusedError, UsageError
from ..fsio import PendingFile, in_owned_folder, read_data_file, refuse_symlink

#: a crontab file or unit file bigger than this is not one sxctl wrote next to: refused (exit 5);
#: the cap of sxctl's own settings file (cron.policy.file.FILE_CAP, not imported: its import is heavy)
OUTSIDE_FILE_CAP = 8 * 1024 * 1024


def refuse_owned_place(path: str | os.PathLike, what: str, instead: str, *, owned: tuple[Path, ...] = ()) -> None:
    """THE rule for every file sxctl writes where a user points it (`cron tick --log` and the
    exported crontab line's log, `--metrics-file`, `--crontab-file`, `--unit-dir`, `cron dump
    -o`): never inside a .scorpiox/ or .scheduler/ folder, or one of the folders `owned` wherever
    they lead (`fsio.in_owned_folder`) — log text appended to the comis store stops the scheduler,
    a file in an inbox is a message. Exit 2, before anything is written."""
    if in_owned_folder(path, owned):
        raise UsageError(f"refusing to write {what} to {os.fspath(path)}: it is inside a .scorpiox/ or .scheduler/ "
                         f"folder, whose files the agent and the scheduler own; {instead}")


def read_outside_file(path: Path) -> bytes | None:
    """A crontab file or unit file sxctl reads (and may replace): None when absent; exit 5 naming
    it when it is a symlink, a FIFO, a device or a folder (never waited on, never read without
    end) or bigger than `OUTSIDE_FILE_CAP`."""
    raw = read_data_file(path, OUTSIDE_FILE_CAP)
    if raw is not None and len(raw) > OUTSIDE_FILE_CAP:
        raise InvalidDataError(path, f"larger than {OUTSIDE_FILE_CAP} bytes; not sxctl's to rewrite")
    return raw


def refuse_non_regular(path: Path) -> None:
    """Right before a file outside sxctl's folders is replaced: it must still be a regular file
    or absent (a device, a FIFO or a folder put there meanwhile is never replaced; exit 5)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        raise InvalidDataError(path, "it is a symbolic link; not replaced")
    if not stat.S_ISREG(mode):
        raise InvalidDataError(path, "not a regular file; not replaced")


def replace_outside_file(path: Path, data: bytes, mode: int | None = None, *, new_mode: int = 0o600) -> None:
    """Replace (or create) a file outside sxctl's folders atomically, only while it is a regular
    file or absent; `mode` None keeps an existing file's mode bits (`new_mode` for a new one)."""
    refuse_symlink(path)
    refuse_non_regular(path)
    if mode is None:
        try:
            mode = stat.S_IMODE(os.lstat(path).st_mode)
        except FileNotFoundError:
            mode = new_mode
    try:
        with PendingFile(path, mode=mode) as pending:
            pending.write_all(data)
            pending.commit(lambda: refuse_non_regular(path))
    except OSError as error:  # named as the file the user gave, not as sxctl's temp beside it
        reason = error.strerror or error.__class__.__name__
        raise SystemRefusedError(f"cannot write {path}: {reason}", file=path) from None


def _home(environ: Mapping[str, str]) -> str:
    """The user's home: $HOME when it is an absolute path, else the password database's."""
    home = environ.get("HOME") or ""
    if os.path.isabs(home):
        return home
    try:
        home = pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        home = ""
    if not os.path.isabs(home):
        raise UsageError("cannot find your home folder: HOME is not an absolute path and the password database "
                         "has none; set HOME")
    return home


def xdg_dir(variable: str, default: str, environ: Mapping[str, str] = os.environ) -> Path:
    """An XDG base folder: the variable when it holds an absolute path (the XDG spec says to
    ignore a relative one), else `default` under the home folder."""
    given = environ.get(variable) or ""
    return Path(given) if os.path.isabs(given) else Path(_home(environ)) / default
