"""The systemd engine: a service + timer pair marked as sxctl's, read back as systemd reads unit
files, installed into (or linked from) the folders systemd loads units from."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..errors import ErrorCode, SxctlError, SystemRefusedError
from .outside import read_outside_file, refuse_non_regular, replace_outside_file, xdg_dir
from .values import MARKER, ReadBackError, TickCommand, check_value, refuse_value, shown

_SYSTEMD_BARE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")
_USER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@-]*\$?")


def _systemd_quote(arg: str) -> str:
    """A word of ExecStart=: quoted when needed, `%` and `$` escaped (specifiers, variables)."""
    arg = arg.replace("%", "%%").replace("$", "$$")
    return arg if _SYSTEMD_BARE.fullmatch(arg) else '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _systemd_line_value(what: str, value: str) -> str:
    """A value that is the rest of a unit file's line (Description=, WorkingDirectory=):
    specifiers escaped; refused when systemd would strip its edge whitespace or join the next
    line to it (a trailing backslash)."""
    check_value(what, value, "systemd")
    if value != value.strip() or value.endswith("\\"):
        raise refuse_value(what, value, "systemd", "systemd strips whitespace at its ends and joins a line "
                           "that ends in a backslash to the next")
    return value.replace("%", "%%")


def _systemd_env(name: str, value: str) -> str:
    """An `Environment=` assignment: one double-quoted word (spaces and `=` kept), `%` escaped
    for specifiers, then `\\` and `"` for the quoting; `$` means nothing there."""
    word = f"{name}={value}".replace("%", "%%")
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'


def systemd_units(tick: TickCommand, *, system: bool = False, user: str | None = None) -> dict[str, str]:
    """`{file name: content}` of the service and its timer (exit 2 when a value cannot be
    written into a unit file), read back as systemd will before they are returned."""
    tick.check("systemd")
    if user is not None and not _USER_NAME.fullmatch(check_value("the user", user, "systemd")):
        raise refuse_value("the user", user, "systemd", "not a user name systemd accepts in User= "
                           "(letters, digits, '_', '.', '@', '-')")
    name = tick.unit_name
    project = _systemd_line_value("the project path", str(tick.project))
    header = f"# sxctl scheduler pass for {project} ({MARKER})\n"
    service = (
        header
        + "[Unit]\n"
        f"Description=sxctl scheduler pass for {project}\n\n"
        "[Service]\n"
        "Type=oneshot\n"
        f"WorkingDirectory={project}\n"  # the rest of the line, unquoted
        + "".join(f"Environment={_systemd_env(name, value)}\n" for name, value in tick.env)
        + f"ExecStart={' '.join(_systemd_quote(arg) for arg in tick.argv())}\n"
        + (f"User={user}\n" if system and user else "")
    )
    timer = (
        header
        + "[Unit]\n"
        f"Description=sxctl scheduler pass for {project}, every minute\n\n"
        "[Timer]\n"
        "OnCalendar=minutely\n"
        "AccuracySec=1s\n"
        "Persistent=true\n"
        f"Unit={name}.service\n\n"
        "[Install]\n"
        "WantedBy=timers.target\n"
    )
    intended_service: dict[tuple[str, str], list[str]] = {
        ("Unit", "Description"): [f"sxctl scheduler pass for {tick.project}"],
        ("Service", "Type"): ["oneshot"],
        ("Service", "WorkingDirectory"): [str(tick.project)],
        ("Service", "ExecStart"): tick.argv(),
    }
    if tick.env:
        intended_service[("Service", "Environment")] = [f"{name}={value}" for name, value in tick.env]
    if system and user:
        intended_service[("Service", "User")] = [user]
    intended_timer = {
        ("Unit", "Description"): [f"sxctl scheduler pass for {tick.project}, every minute"],
        ("Timer", "OnCalendar"): ["minutely"], ("Timer", "AccuracySec"): ["1s"], ("Timer", "Persistent"): ["true"],
        ("Timer", "Unit"): [f"{name}.service"], ("Install", "WantedBy"): ["timers.target"],
    }
    for text, intended in ((service, intended_service), (timer, intended_timer)):
        if read_unit(text) != intended:
            raise ReadBackError("systemd", "a setting would read back with another value")
    return {f"{name}.service": service, f"{name}.timer": timer}


def read_unit(text: str) -> dict[tuple[str, str], list[str]]:
    """A unit file as systemd reads the settings sxctl writes: `(section, key)` -> its values,
    specifiers (`%%`) undone, and ExecStart= split into its words (quotes, C escapes, `$$`). A
    line that systemd would join to the next (a trailing backslash), an edge whitespace it would
    strip or anything else sxctl never writes reads as `{"?": ...}`, which equals no intention."""
    settings: dict[tuple[str, str], list[str]] = {}
    section = None
    for line in text.split("\n"):
        if line.endswith("\\"):
            return {("?", "continued line"): [line]}
        if not line.strip() or line.lstrip().startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        key, sep, value = line.partition("=")
        if not sep or section is None or value != value.strip() or key != key.strip():
            return {("?", "line"): [line]}
        try:
            if key == "ExecStart":
                values = _exec_words(value)
            elif key == "Environment":
                values = [_unspecify(word) for word in _unit_words(value)]
            else:
                values = [_unspecify(value)]
        except ValueError as error:
            return {("?", str(error)): [line]}
        settings.setdefault((section, key), []).extend(values)
    return settings


def _unspecify(value: str) -> str:
    """systemd's specifier expansion for values sxctl writes: `%%` is `%`, any other `%x` is a
    specifier sxctl never means."""
    out, index = [], 0
    while index < len(value):
        if value[index] == "%":
            if value[index + 1:index + 2] != "%":
                raise ValueError("a specifier")
            index += 1
        out.append(value[index])
        index += 1
    return "".join(out)


_C_ESCAPES = {"\\": "\\", '"': '"', "'": "'", "n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b",
              "f": "\f", "v": "\v", "s": " "}


def _unit_words(value: str) -> list[str]:
    """A setting's words as systemd splits them (ExecStart=, Environment=): whitespace between
    words, quotes removed, C escapes undone (only the ones sxctl writes; others raise)."""
    words: list[str] = []
    index = 0
    while index < len(value):
        if value[index] in " \t":
            index += 1
            continue
        word, quote = [], None
        while index < len(value) and (quote or value[index] not in " \t"):
            ch = value[index]
            if ch == "\\":
                escape = value[index + 1:index + 2]
                if escape not in _C_ESCAPES:
                    raise ValueError("an escape sxctl never writes")
                word.append(_C_ESCAPES[escape])
                index += 2
                continue
            if quote is None and ch in "\"'":
                quote = ch
            elif ch == quote:
                quote = None
            else:
                word.append(ch)
            index += 1
        if quote is not None:
            raise ValueError("an open quote")
        words.append("".join(word))
    return words


def _exec_words(value: str) -> list[str]:
    """ExecStart='s words as systemd splits them (quotes, C escapes), then its `$$` and `%%`."""
    words: list[str] = []
    for text in _unit_words(value):
        if text == ";" or re.search(r"\$(?!\$)", text.replace("$$", "")):
            raise ValueError("a command separator or variable")
        words.append(_unspecify(text.replace("$$", "$")))
    if words and not words[0].startswith("/"):
        raise ValueError("a command that is not an absolute path")
    return words


def systemd_unit_dir(system: bool, environ: Mapping[str, str] = os.environ) -> Path:
    """Where systemd looks for the units: /etc/systemd/system, or the user's
    `$XDG_CONFIG_HOME/systemd/user` (a relative XDG_CONFIG_HOME is ignored: ~/.config)."""
    if system:
        return Path("/etc/systemd/system")
    return xdg_dir("XDG_CONFIG_HOME", ".config", environ) / "systemd" / "user"


def systemd_search_paths(system: bool, environ: Mapping[str, str] = os.environ) -> list[Path]:
    """The folders systemd loads units from (systemd.unit(5), "Unit File Load Path"), without the
    generator and `.control` folders nobody installs into: a unit file elsewhere is found only
    once `systemctl link` has linked it into the first of them."""
    if system:
        return [Path(p) for p in ("/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system",
                                  "/usr/lib/systemd/system", "/lib/systemd/system")]

    def dirs(variable: str, default: str) -> list[Path]:
        given = [d for d in (environ.get(variable) or "").split(":") if os.path.isabs(d)]
        return [Path(d) / "systemd" / "user" for d in (given or default.split(":"))]

    runtime = environ.get("XDG_RUNTIME_DIR") or ""
    return [systemd_unit_dir(False, environ), *dirs("XDG_CONFIG_DIRS", "/etc/xdg"), Path("/etc/systemd/user"),
            *([Path(runtime) / "systemd" / "user"] if os.path.isabs(runtime) else []), Path("/run/systemd/user"),
            xdg_dir("XDG_DATA_HOME", ".local/share", environ) / "systemd" / "user",
            *dirs("XDG_DATA_DIRS", "/usr/local/share:/usr/share"), Path("/usr/local/lib/systemd/user"),
            Path("/usr/lib/systemd/user")]


def systemd_reads(folder: Path, system: bool, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether systemd (the user's, or the system's) loads units from `folder` by their names."""
    real = os.path.realpath(folder)
    return any(os.path.realpath(path) == real for path in systemd_search_paths(system, environ))


def systemctl(system: bool, *args: str) -> list[str]:
    return ["systemctl", *([] if system else ["--user"]), *args]


def enable_commands(tick: TickCommand, system: bool, folder: Path,
                    environ: Mapping[str, str] = os.environ) -> list[list[str]]:
    """What enables the units written into `folder`: by name where systemd reads that folder,
    else linked into systemd's configuration folder first (`systemctl link`, which `disable`
    and sxctl's `--uninstall` undo)."""
    name = tick.unit_name
    reload, enable = systemctl(system, "daemon-reload"), systemctl(system, "enable", "--now", f"{name}.timer")
    if systemd_reads(folder, system, environ):
        return [reload, enable]
    return [systemctl(system, "link", str(folder / f"{name}.service"), str(folder / f"{name}.timer")), reload, enable]


def disable_commands(tick: TickCommand, system: bool) -> list[list[str]]:
    """Run before the unit files are removed (`--uninstall --now`): stop the timer and remove
    every link `enable` and `link` made (systemctl reports a unit whose file is already gone as
    missing and then stops nothing)."""
    return [systemctl(system, "disable", "--now", f"{tick.unit_name}.timer")]


def stop_commands(tick: TickCommand, system: bool) -> list[list[str]]:
    """After sxctl removed the unit files and their links (`--uninstall` without `--now`): stop a
    timer that still runs from memory, and make systemd forget the units."""
    return [systemctl(system, "stop", f"{tick.unit_name}.timer"), systemctl(system, "daemon-reload")]


def command_line(commands: list[list[str]], separator: str = " && ") -> str:
    """Commands as one line a shell runs (each argument quoted where it must be)."""
    return separator.join(shlex.join(argv) for argv in commands)


def run_systemctl(commands: list[list[str]], environ: Mapping[str, str] = os.environ) -> list[str] | None:
    """Run systemctl commands in order, the systemctl on `environ`'s PATH: the lines run, or None
    when there is no systemctl (nothing is run). The first that fails stops the rest: exit 8
    naming it and what it said."""
    program = shutil.which("systemctl", path=environ.get("PATH") or os.defpath)
    if program is None:
        return None
    ran: list[str] = []
    for argv in commands:
        line = shlex.join(argv)
        try:
            done = subprocess.run([program, *argv[1:]], stdin=subprocess.DEVNULL, capture_output=True, timeout=120,
                                  env=dict(environ))
        except subprocess.TimeoutExpired:
            raise SxctlError(f"`{line}` did not finish within 120 s", code=ErrorCode.TIMEOUT) from None
        except OSError as error:
            raise SystemRefusedError.from_os_error(error, f"cannot run `{line}`:") from None
        if done.returncode != 0:
            said = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise SystemRefusedError(f"`{line}` failed (exit {done.returncode})"
                                     + (f": {shown(said[-1])[1:-1]}" if said else ""), ran=ran)
        ran.append(line)
    return ran


def systemd_links(tick: TickCommand, folder: Path, system: bool,
                  environ: Mapping[str, str] = os.environ) -> list[Path]:
    """The symbolic links `systemctl enable` and `systemctl link` made for these units: a
    `timers.target.wants/NAME.timer` in `folder` or in systemd's configuration folder, and there
    `NAME.service`/`NAME.timer` linked to the files in `folder`. Only links that point at these
    units' files; never a regular file, never a link that points elsewhere."""
    name = tick.unit_name
    config = systemd_unit_dir(system, environ)
    ours = {os.path.normpath(os.path.join(base, f"{name}.{suffix}"))
            for base in (str(folder), os.path.realpath(folder), str(config)) for suffix in ("service", "timer")}
    candidates = [folder / "timers.target.wants" / f"{name}.timer"]
    if os.path.realpath(config) != os.path.realpath(folder):
        candidates += [config / "timers.target.wants" / f"{name}.timer", config / f"{name}.timer",
                       config / f"{name}.service"]
    found = []
    for path in candidates:
        try:
            target = os.readlink(path)
        except OSError:  # absent, or not a symbolic link: not one systemctl made
            continue
        if os.path.normpath(os.path.join(path.parent, target)) in ours and _ours_or_gone(Path(os.path.realpath(path))):
            found.append(path)
    return found


def _ours_or_gone(path: Path) -> bool:
    """Whether a link's final target is a unit file sxctl wrote, or nothing (a dangling link)."""
    try:
        data = read_outside_file(path)
    except SxctlError:  # a folder, a FIFO, a file too big: not sxctl's
        return False
    return data is None or MARKER.encode() in data


def install_systemd(units: dict[str, str], folder: Path) -> list[Path]:
    """Write the unit files (0644: systemd reads them as another user); the ones changed. A file
    of the same name that sxctl did not write is never replaced (exit 4)."""
    changed = []
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise SystemRefusedError.from_os_error(error, f"cannot create {folder}") from None
    for name, text in units.items():
        path = folder / name
        data = text.encode()
        old = read_outside_file(path)
        if old == data:
            continue
        if old is not None and MARKER.encode() not in old:
            raise SxctlError(f"{path} exists and was not written by sxctl; not replaced", code=ErrorCode.NAME_TAKEN)
        replace_outside_file(path, data, mode=0o644)
        changed.append(path)
    return changed


def uninstall_systemd(units: dict[str, str], folder: Path, links: Iterable[Path] = ()) -> list[Path]:
    """Remove the links `enable`/`link` made (`systemd_links`; a `timers.target.wants` folder
    left empty goes too) and the unit files sxctl wrote (the marker says so); the ones removed."""
    removed = []
    for link in links:
        try:
            link.unlink()
        except FileNotFoundError:
            continue
        except OSError as error:
            raise SystemRefusedError.from_os_error(error, "cannot remove") from None
        removed.append(link)
        if link.parent.name == "timers.target.wants":
            try:
                link.parent.rmdir()
            except OSError:  # not empty (other timers), or gone: kept as it is
                pass
    for name in units:
        path = folder / name
        old = read_outside_file(path)
        if old is None or MARKER.encode() not in old:
            continue
        refuse_non_regular(path)
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        except OSError as error:
            raise SystemRefusedError.from_os_error(error, "cannot remove") from None
        removed.append(path)
    return removed
