"""The engines teams already run, configured to say "now" once a minute: a crontab line, a systemd
service + timer pair, a Kubernetes CronJob. Each runs `sxctl cron tick`; sxctl stays the
at-most-once gate and the record (the store lock, claims and the ledger), so an engine that fires
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
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import re
import shlex
import stat
import subprocess
import sys
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import __version__
from .errors import (
    ConflictError,
    InvalidDataError,
    NotFoundError,
    SxctlError,
    SystemRefusedError,
    UsageError,
)
from .fsio import PendingFile, read_data_file, refuse_symlink

TARGETS = ("crontab", "systemd", "kubernetes")
MARKER = "managed by `sxctl cron export --install`"
#: a crontab file or unit file bigger than this is not one sxctl wrote next to: refused (exit 5);
#: the cap of sxctl's own settings file (cron.policy.FILE_CAP, not imported: its import is heavy)
OUTSIDE_FILE_CAP = 8 * 1024 * 1024
#: the longest command cron keeps (Debian's cron cuts a longer one silently: MAX_COMMAND 1000)
CRON_COMMAND_MAX = 999
CRONTAB_LOCK_WAIT_S = 30.0


# --- the values that reach a generated file ------------------------------------------------------

def shown(value: str) -> str:
    """`value` quoted for a one-line message: control characters escaped (`\\n`, `\\x1b`, …),
    bytes that are not UTF-8 as `\\xNN`."""
    out = []
    for ch in value:
        if "\udc80" <= ch <= "\udcff":  # a byte os.fsdecode could not decode
            out.append(f"\\x{ord(ch) - 0xDC00:02x}")
        elif ch.isprintable() or ch == " ":
            out.append(ch)
        else:
            out.append(ch.encode("unicode_escape", "backslashreplace").decode("ascii"))
    return "'" + "".join(out) + "'"


def unsafe_reason(value: str) -> str | None:
    """Why `value` cannot go into any generated file (None when it can): bytes that are not UTF-8,
    control characters (newline, tab, escape, DEL, C1), line and paragraph separators (YAML and
    some readers break lines there) and Unicode noncharacters (YAML parsers refuse them)."""
    for ch in value:
        code = ord(ch)
        if 0xD800 <= code <= 0xDFFF:
            return "it is not valid UTF-8 text"
        category = unicodedata.category(ch)
        if category in ("Cc", "Zl", "Zp"):
            return f"it holds the control character U+{code:04X}"
        if (code & 0xFFFE) == 0xFFFE or 0xFDD0 <= code <= 0xFDEF:
            return f"it holds the noncharacter U+{code:04X}"
    return None


def refuse_value(what: str, value: str, target: str, why: str) -> UsageError:
    return UsageError(f"{what} {shown(value)} cannot be written into a {target} configuration: {why}; "
                      "nothing was written", value=shown(value)[1:-1], target=target)


def check_value(what: str, value: str, target: str) -> str:
    """`value` when it may reach a `target` file; else exit 2 naming it and the target."""
    why = unsafe_reason(value)
    if why is not None:
        raise refuse_value(what, value, target, why)
    return value


class ReadBackError(SxctlError):
    """A generated configuration that does not read back as the values it was made from."""

    def __init__(self, target: str, detail: str) -> None:
        super().__init__(f"the {target} configuration for these values does not read back as written ({detail}); "
                         "nothing was written", code="invalid_value", target=target)


@dataclass
class TickCommand:
    """What every engine runs: this installation's interpreter, the project, the workspace."""

    project: Path
    workspace: Path
    python: str = field(default_factory=lambda: os.path.abspath(sys.executable))
    #: `--env NAME=VALUE`: variables the engine sets for the pass (checked by `check_env`)
    env: tuple[tuple[str, str], ...] = ()

    @property
    def slug(self) -> str:
        """A name for this project's units and jobs: the folder name and a short hash of the path
        (two checkouts called `app` get two timers). The hash is of the path's bytes, so a folder
        whose name is not UTF-8 has one too."""
        base = re.sub(r"[^a-z0-9]+", "-", self.project.name.lower()).strip("-")[:30] or "project"
        return f"{base}-{hashlib.sha256(os.fsencode(self.project)).hexdigest()[:8]}"

    @property
    def unit_name(self) -> str:
        """The name of this project's systemd units and Kubernetes CronJob."""
        return f"sxctl-tick-{self.slug}"

    def argv(self, python: str | None = None) -> list[str]:
        args = [python or self.python, "-m", "sxctl", "--project", str(self.project)]
        if self.workspace != self.project:
            args += ["--workspace", str(self.workspace)]
        return [*args, "cron", "tick", "--busy-ok", "-q"]

    def check(self, target: str) -> None:
        """Exit 2 when a path or a variable of this command cannot go into a `target` file."""
        check_value("the project path", str(self.project), target)
        check_value("the workspace path", str(self.workspace), target)
        check_value("the interpreter path", self.python, target)
        check_env(self.env, target)


ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_env(pairs: Iterable[tuple[str, str]], target: str) -> tuple[tuple[str, str], ...]:
    """`--env NAME=VALUE` pairs, in order, when every one may reach a `target` file: NAME a
    variable name (letters, digits, `_`, not starting with a digit), given once; VALUE passes
    `check_value` (each target's own quoting and its read-back do the rest). Else exit 2."""
    seen: dict[str, str] = {}
    for name, value in pairs:
        if not ENV_NAME.fullmatch(name):
            raise UsageError(f"--env: {shown(name)} is not a variable name (letters, digits and '_', not starting "
                             "with a digit); nothing was written", value=shown(name)[1:-1],
                             target=target)
        if name in seen:
            raise UsageError(f"--env {name} is given twice; give each variable once", target=target)
        seen[name] = check_value(f"--env {name}", value, target)
    return tuple(seen.items())


# --- files outside sxctl's folders ---------------------------------------------------------------

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


def replace_outside_file(path: Path, data: bytes, mode: int | None = None) -> None:
    """Replace (or create) a file outside sxctl's folders atomically, only while it is a regular
    file or absent; `mode` None keeps an existing file's mode bits (0600 for a new one)."""
    refuse_symlink(path)
    refuse_non_regular(path)
    if mode is None:
        try:
            mode = stat.S_IMODE(os.lstat(path).st_mode)
        except FileNotFoundError:
            mode = 0o600
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
    import pwd

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


# --- crontab -------------------------------------------------------------------------------------

_LOG_DIR = "${XDG_STATE_HOME:-$HOME/.local/state}/sxctl"
#: the command that sets `--env` variables in a crontab entry: a word of its own for each, which
#: env(1) reads as NAME=VALUE whatever sh's quoting (sh's own `NAME=value` prefix is an
#: assignment only while NAME stays unquoted, which a read-back by words cannot see)
_ENV_COMMAND = "/usr/bin/env"


def _cron_word(word: str) -> str:
    """One shell word of a crontab command: shell-quoted, every `%` outside the quotes and
    escaped for cron (`\\%`), so no backslash of the word can ever stand right before it (cron
    reads `\\\\%` as an escaped backslash and an unescaped `%`, which cuts the line)."""
    if "%" not in word:
        return shlex.quote(word)
    return "\\%".join(shlex.quote(piece) if piece else "" for piece in word.split("%"))


def crontab_log(tick: TickCommand) -> str:
    """The crontab entry's `--log` file, as sh sees it before expanding it: under
    `$XDG_STATE_HOME/sxctl` (default `~/.local/state/sxctl`), one per project."""
    return f"{_LOG_DIR}/tick-{tick.slug}.log"


def _crontab_words(tick: TickCommand) -> list[str]:
    """The words sh must see in the crontab's command (what `check_crontab_block` compares)."""
    env = [_ENV_COMMAND, *(f"{name}={value}" for name, value in tick.env)] if tick.env else []
    return ["cd", str(tick.project), "&&", *env, *tick.argv(), "--log", crontab_log(tick)]


def _begin_line(tick: TickCommand) -> str:
    return f"# BEGIN sxctl cron tick for {tick.project} ({MARKER}; remove with --uninstall)"


def _end_line(tick: TickCommand) -> str:
    return f"# END sxctl cron tick for {tick.project}"


_CRONTAB_NOTE = ("# every minute: one scheduler pass, logged under $XDG_STATE_HOME/sxctl "
                 "(default ~/.local/state), moved to .1 at 1 MiB")


def crontab_block(tick: TickCommand) -> str:
    """sxctl's block for this project (exit 2 when a value cannot be written into a crontab),
    read back the way cron and sh will before it is returned. The pass writes its own log
    (`cron tick --log`, bounded by `TickLog`): the entry redirects nothing, so it never appends
    without end."""
    tick.check("crontab")
    words = _crontab_words(tick)[3:-2]  # the command after `cd PROJECT &&`, before `--log FILE`
    command = (f"cd {_cron_word(str(tick.project))} && {' '.join(_cron_word(word) for word in words)} "
               f'--log "{crontab_log(tick)}"')
    size = len(command.encode())
    if size > CRON_COMMAND_MAX:
        why = f"the command would be {size} bytes long, and cron keeps at most {CRON_COMMAND_MAX}"
        if tick.env:
            raise UsageError(f"the crontab entry with these --env values would be {size} bytes long, and cron "
                             f"keeps at most {CRON_COMMAND_MAX} (it drops the rest without a word); shorten them, "
                             "or use --target systemd; nothing was written", target="crontab")
        raise refuse_value("the project path", str(tick.project), "crontab", why)
    block = f"{_begin_line(tick)}\n{_CRONTAB_NOTE}\n* * * * * {command}\n{_end_line(tick)}\n"
    check_crontab_block(block, tick)
    return block


def cron_command(field: str) -> tuple[str, str | None]:
    """What cron runs for an entry's command field, as Vixie cron and cronie read it: `\\%` is a
    `%`, any other backslash stays; the first unescaped `%` ends the command and starts its
    standard input. (command, stdin or None)."""
    out: list[str] = []
    escaped = False
    for index, ch in enumerate(field):
        if escaped:
            if ch == "%":
                out[-1] = "%"
            else:
                out.append(ch)
            escaped = False
            continue
        if ch == "%":
            return "".join(out), field[index + 1:]
        out.append(ch)
        escaped = ch == "\\"
    return "".join(out), None


def check_crontab_block(block: str, tick: TickCommand) -> None:
    """The block must be its four lines, one of them an entry whose command cron runs whole and
    sh splits into exactly the intended words."""
    lines = block.split("\n")
    if lines[-1] != "" or lines[:-1][0:2] != [_begin_line(tick), _CRONTAB_NOTE] or len(lines) != 5 \
            or lines[3] != _end_line(tick):
        raise ReadBackError("crontab", "the block is not its four lines")
    if not lines[2].startswith("* * * * * "):
        raise ReadBackError("crontab", "the entry is not one every minute")
    command, stdin = cron_command(lines[2][len("* * * * * "):])
    if stdin is not None:
        raise ReadBackError("crontab", "cron would cut the command at a '%'")
    try:
        words = shlex.split(command)
    except ValueError as error:
        raise ReadBackError("crontab", f"sh could not read the command: {error}") from None
    if words != _crontab_words(tick):
        raise ReadBackError("crontab", "sh would run other words than intended")


def _block_spans(text: str, tick: TickCommand) -> list[tuple[int, int]]:
    """Where sxctl's blocks for exactly this project are: whole lines equal to its begin and
    end markers (a block for `app (copy)` is not one for `app`)."""
    begin, end = _begin_line(tick), _end_line(tick)
    spans = []
    lines = text.split("\n")  # cron's lines: only a newline ends one
    offsets = [0]
    for line in lines:
        offsets.append(min(offsets[-1] + len(line) + 1, len(text)))
    index = 0
    while index < len(lines):
        if lines[index] == begin:
            for stop in range(index + 1, len(lines)):
                if lines[stop] == end:
                    spans.append((offsets[index], offsets[stop + 1]))
                    index = stop
                    break
            else:
                raise SxctlError(f"the crontab has the start of sxctl's block for {tick.project} but not its end; "
                                 "fix it with `crontab -e`", code="invalid_data")
        index += 1
    return spans


def blocks_in(text: str, tick: TickCommand) -> list[str]:
    """sxctl's blocks for this project in a crontab's text (normally none or one)."""
    return [text[start:stop] for start, stop in _block_spans(text, tick)]


def has_block(text: str, tick: TickCommand) -> bool:
    """Whether a crontab's text holds sxctl's block for this project."""
    try:
        return bool(_block_spans(text, tick))
    except SxctlError:
        return True  # its start is there (doctor says installed; `--install` says what is wrong)


def _decode(raw: bytes) -> str:
    """A crontab's bytes as text, every byte kept (one not UTF-8 comes back on writing)."""
    return raw.decode("utf-8", "surrogateescape")


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


class Crontab:
    """The user's crontab through crontab(1), or a crontab file given instead (a file for
    /etc/cron.d-style setups, or a test). Its text keeps every byte, UTF-8 or not."""

    def __init__(self, file: Path | None = None) -> None:
        self.file = file

    def __str__(self) -> str:
        return str(self.file) if self.file is not None else "your crontab"

    def read(self) -> str:
        if self.file is not None:
            return _decode(read_outside_file(self.file) or b"")
        done = self._crontab("-l")
        if done.returncode != 0:
            err = done.stderr.decode("utf-8", "replace").strip()
            if "no crontab" in err:
                return ""
            raise SxctlError(f"crontab -l failed: {err}", code="internal")
        if len(done.stdout) > OUTSIDE_FILE_CAP:
            raise InvalidDataError("crontab -l", f"larger than {OUTSIDE_FILE_CAP} bytes")
        return _decode(done.stdout)

    def write(self, text: str) -> None:
        if self.file is not None:
            replace_outside_file(self.file, _encode(text))
            return
        done = self._crontab("-", _encode(text))
        if done.returncode != 0:
            raise SxctlError(f"crontab - failed: {done.stderr.decode('utf-8', 'replace').strip()}", code="internal")

    @staticmethod
    def _crontab(arg: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
        """crontab(1) found on PATH the way a shell finds it: a PATH folder that cannot be searched
        (or a `crontab` there that cannot be run) is passed over, not reported as the crontab's
        failure."""
        import shutil

        program = shutil.which("crontab")
        if program is None:
            raise NotFoundError("crontab(1) is not installed here; install cron, or use --target systemd "
                                "(or --crontab-file FILE)", code="file_not_found")
        try:
            return subprocess.run([program, arg], input=stdin if stdin is not None else b"", capture_output=True,
                                  timeout=30)
        except subprocess.TimeoutExpired:
            raise SxctlError(f"crontab {arg} did not finish within 30 s", code="timeout") from None
        except OSError as error:
            raise SystemRefusedError.from_os_error(error, "cannot run crontab(1)") from None


def crontab_lock_folder() -> Path:
    """`/tmp/sxctl-<uid>`: one folder per user id, whatever HOME or XDG_STATE_HOME say. A crontab
    belongs to the user id, so every sxctl that edits it — another shell with another HOME, `sudo`
    without `-H` — must meet at the same lock. Made 0700; refused (exit 5) unless it is a real
    folder of this user that nobody else may enter (as tmux does with /tmp/tmux-<uid>)."""
    import stat

    folder = Path(f"/tmp/sxctl-{os.getuid()}")
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except OSError as error:
        raise SystemRefusedError.from_os_error(error, "cannot create the folder of the crontab lock") from None
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise SxctlError(f"refusing to use {folder} for the crontab lock: it must be a folder of user "
                         f"{os.getuid()} with mode 0700 (remove it and run the command again)",
                         code="invalid_data", file=folder)
    return folder


def crontab_lock():
    """The lock every sxctl process of this user takes around its crontab edit (read, write,
    read back): `/tmp/sxctl-<uid>/crontab.lock`, held up to 30 s (exit 4)."""
    from .locks import writer_lock

    path = crontab_lock_folder() / "crontab.lock"
    refuse_symlink(path)
    refuse_non_regular(path)
    return writer_lock(path, CRONTAB_LOCK_WAIT_S, "the crontab")


def _edit_crontab(tick: TickCommand, crontab: Crontab, edit: Callable[[str], str], wanted: list[str]) -> bool:
    """Apply `edit` to the crontab under the lock; read it back: sxctl's blocks for this project
    must then be exactly `wanted`, or exit 4 (another program changed the crontab meanwhile).
    False when nothing had to change."""
    with crontab_lock():
        text = crontab.read()
        new = edit(text)
        if new == text:
            return False
        crontab.write(new)
        try:
            found = blocks_in(crontab.read(), tick)
        except SxctlError as error:
            found = [error.message]
        if found != wanted:
            state = "is not there as written" if wanted else "is still there"
            raise ConflictError(f"{crontab} was written, but sxctl's block for {tick.project} {state} when read back "
                                "(another program changed it at the same time); run the command again",
                                code="lost_update")
    return True


def install_crontab(tick: TickCommand, crontab: Crontab) -> bool:
    """Put sxctl's block in the crontab (replacing an older one, and any copy of it); False when
    it was there as is."""
    block = crontab_block(tick)

    def edit(text: str) -> str:
        spans = _block_spans(text, tick)
        if not spans:
            return text + ("\n" if text and not text.endswith("\n") else "") + block
        new = text[:spans[0][0]] + block
        for (_, stop), (start, _) in zip(spans, spans[1:], strict=False):
            new += text[stop:start]
        return new + text[spans[-1][1]:]

    return _edit_crontab(tick, crontab, edit, [block])


def uninstall_crontab(tick: TickCommand, crontab: Crontab) -> bool:
    """Remove every sxctl block for this project; False when there was none."""

    def edit(text: str) -> str:
        kept, last = "", 0
        for start, stop in _block_spans(text, tick):
            kept += text[last:start]
            last = stop
        return kept + text[last:]

    return _edit_crontab(tick, crontab, edit, [])


# --- the pass's own log (`cron tick --log`) -------------------------------------------------------

class TickLog(io.RawIOBase):
    """`cron tick --log FILE`: what the pass prints, appended to FILE, each line stamped with
    its UTC time. Before a write would take FILE past `cap` bytes, FILE is renamed to FILE.1
    (replacing it), so the two never hold more than `2 * cap` (a single write larger than `cap`
    fills a file of its own). Each write happens under an flock of the file it goes to, after
    checking that FILE is still that file: two passes at once neither rotate twice nor write
    into a file already moved away. FILE is a regular file or absent (never through a
    symbolic link: exit 5); its folders are made (0700) when missing. A write the disk refuses
    goes to `fallback` (cron's mail) instead of failing the pass."""

    def __init__(self, path: Path, cap: int, now_ms: Callable[[], int], fallback: Any = None) -> None:
        super().__init__()
        self.path = Path(os.path.abspath(path))
        self.cap = cap
        self.now_ms = now_ms
        self.fallback = fallback
        self._line_start = True
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as error:
            raise SystemRefusedError.from_os_error(error, "cannot create the folder of the log") from None
        self._fd: int | None = self._open()

    def _open(self) -> int:
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
                         | os.O_CLOEXEC, 0o600)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise InvalidDataError(self.path, "it is a symbolic link; the log is not written through it") \
                    from None
            if error.errno in (errno.ENXIO, errno.EISDIR):
                raise InvalidDataError(self.path, "not a regular file; the log is not written there") from None
            raise SystemRefusedError.from_os_error(error, "cannot open the log") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise InvalidDataError(self.path, "not a regular file; the log is not written there")
        return fd

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        data = bytes(data)
        try:
            self._append(self._stamped(data))
        except (OSError, SxctlError) as error:
            if self.fallback is not None:
                self.fallback.write(f"sxctl: cannot write the log {self.path}: {error}\n"
                                    + data.decode("utf-8", "backslashreplace"))
                self.fallback.flush()
        return len(data)

    def _stamped(self, data: bytes) -> bytes:
        import time

        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ ", time.gmtime(self.now_ms() / 1000)).encode()
        out = []
        for piece in data.splitlines(keepends=True):
            out.append(stamp + piece if self._line_start else piece)
            self._line_start = piece.endswith(b"\n")
        return b"".join(out)

    def _append(self, data: bytes) -> None:
        import fcntl

        while True:
            if self._fd is None:
                self._fd = self._open()
            fd = self._fd
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                own = os.fstat(fd)
                try:
                    now = os.stat(self.path, follow_symlinks=False)
                    moved = (now.st_dev, now.st_ino) != (own.st_dev, own.st_ino)
                except FileNotFoundError:
                    moved = True
                if not moved and own.st_size and own.st_size + len(data) > self.cap:
                    os.replace(self.path, f"{self.path}.1")
                    moved = True
                if not moved:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view):]
                    return
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)  # moved away (by this pass or another): write to the file at the path now
            self._fd = None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        super().close()


# --- systemd -------------------------------------------------------------------------------------

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
    import shutil

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
            raise SxctlError(f"`{line}` did not finish within 120 s", code="timeout") from None
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
            raise SxctlError(f"{path} exists and was not written by sxctl; not replaced", code="name_taken")
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


# --- Kubernetes ----------------------------------------------------------------------------------

_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_IMAGE_PATH = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
#: an image reference as the container tools read it: [registry[:port]/]path[:tag][@digest]
_IMAGE_REFERENCE = re.compile(
    rf"(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::[0-9]+)?/)?{_IMAGE_PATH}(?:/{_IMAGE_PATH})*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?")
_KEY = re.compile(r"[A-Za-z][A-Za-z0-9./-]*")


def _yaml_scalar(value: Any) -> str:
    """Every scalar quoted: a string as a JSON string (valid YAML double-quoted), a number as is."""
    import json

    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(f"not a scalar sxctl writes: {value!r}")
    return json.dumps(value, ensure_ascii=False)


def to_yaml(value: dict[str, Any], notes: Mapping[str, str] = {}, indent: int = 0) -> str:
    """Block YAML of a manifest (mappings of fixed keys; every scalar quoted; a list of scalars
    in flow style), with a comment after the keys `notes` names."""
    lines = []
    pad = " " * indent
    for key, item in value.items():
        if not _KEY.fullmatch(key):
            raise TypeError(f"not a key sxctl writes: {key!r}")
        note = f"  # {notes[key]}" if key in notes else ""
        if isinstance(item, dict):
            lines.append(f"{pad}{key}:{note}\n{to_yaml(item, notes, indent + 2)}")
        elif isinstance(item, list) and all(not isinstance(x, dict | list) for x in item):
            lines.append(f"{pad}{key}: [{', '.join(_yaml_scalar(x) for x in item)}]{note}\n")
        elif isinstance(item, list):
            lines.append(f"{pad}{key}:{note}\n")
            for element in item:
                body = to_yaml(element, notes, indent + 4)
                lines.append(f"{pad}  - {body[indent + 4:]}")
        else:
            lines.append(f"{pad}{key}: {_yaml_scalar(item)}{note}\n")
    return "".join(lines)


def _k8s_literal(text: str) -> str:
    """A container's `command` item or env `value` exactly as given: Kubernetes expands `$(NAME)`
    there and reads `$$` as `$`, so every `$` is doubled."""
    return text.replace("$", "$$")


def cronjob_manifest(tick: TickCommand, *, image: str, pvc: str, mount: str, uid: int, gid: int) -> str:
    """A batch/v1 CronJob that runs one pass a minute in a pod that mounts the project (exit 2
    when a value cannot be written into it), parsed back by a YAML parser before it is returned:
    one document, one CronJob, exactly the intended values."""
    check_value("the project path", str(tick.project), "kubernetes")
    check_value("--image", image, "kubernetes")
    check_value("--mount", mount, "kubernetes")
    check_value("--pvc", pvc, "kubernetes")
    check_env(tick.env, "kubernetes")
    if not mount.startswith("/"):
        raise UsageError(f"--mount {shown(mount)} must be an absolute path in the container")
    if mount.rstrip("/") == "" or any(part in (".", "..") for part in mount.split("/")):
        raise refuse_value("--mount", mount, "kubernetes", "the project's folder in the container must be a plain "
                           "absolute path below / (no '.' or '..'; not / itself, which would cover the image)")
    if len(pvc) > 253 or not _DNS_SUBDOMAIN.fullmatch(pvc):
        raise refuse_value("--pvc", pvc, "kubernetes", "not a PersistentVolumeClaim name (lowercase letters, "
                           "digits, '-' and '.', at most 253)")
    if len(image) > 512 or not _IMAGE_REFERENCE.fullmatch(image):
        raise refuse_value("--image", image, "kubernetes", "not an image reference "
                           "([registry[:port]/]name[:tag][@digest], e.g. ghcr.io/acme/sxctl:1.2)")
    project = mount.rstrip("/") or "/"
    container: dict[str, Any] = {
        "name": "sxctl-tick",
        "image": image,
        "command": [_k8s_literal(word) for word in ("sxctl", "--project", project, "cron", "tick", "--busy-ok", "-q")],
    }
    if tick.env:
        container["env"] = [{"name": name, "value": _k8s_literal(value)} for name, value in tick.env]
    container["volumeMounts"] = [{"name": "project", "mountPath": project}]
    security: dict[str, Any] = {"runAsUser": uid, "runAsGroup": gid, "fsGroup": gid}
    if uid != 0:
        security["runAsNonRoot"] = True
    manifest: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": tick.unit_name[:52],
                     "labels": {"app.kubernetes.io/name": "sxctl-tick", "app.kubernetes.io/version": __version__}},
        "spec": {
            "schedule": "* * * * *",
            "timeZone": "Etc/UTC",
            "concurrencyPolicy": "Forbid",
            "startingDeadlineSeconds": 50,
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 3,
            "jobTemplate": {"spec": {
                "backoffLimit": 0,
                "activeDeadlineSeconds": 600,
                "template": {"spec": {
                    "restartPolicy": "Never",
                    "securityContext": security,
                    "containers": [container],
                    "volumes": [{"name": "project", "persistentVolumeClaim": {"claimName": pvc}}],
                }},
            }},
        },
    }
    notes = {
        "concurrencyPolicy": "one pass at a time (sxctl's lock would refuse the second anyway)",
        "startingDeadlineSeconds": "a pass that cannot start within the minute is skipped, not queued",
        "backoffLimit": "a failed pass is not retried: the next minute's pass comes",
        "securityContext": "the owner of the agent's files (sxctl writes 0600 files)",
    }
    text = (f"# sxctl scheduler pass for {tick.project}, every minute (sxctl cron export --target kubernetes).\n"
            f"# The project folder is on the volume {pvc}, mounted at {project}. Kubernetes may start a Job\n"
            "# twice or not at all; sxctl's store lock and claims keep every run at most once, and a missed\n"
            "# minute shows in `sxctl doctor` (the heartbeat) and in the ledger.\n"
            + to_yaml(manifest, notes))
    check_manifest(text, manifest)
    return text


def check_manifest(text: str, manifest: dict[str, Any]) -> None:
    """A YAML parser must read `text` as exactly one document equal to `manifest`."""
    import yaml

    try:
        documents = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as error:
        raise ReadBackError("kubernetes", f"not YAML: {str(error).splitlines()[0]}") from None
    if len(documents) != 1:
        raise ReadBackError("kubernetes", f"{len(documents)} objects instead of one CronJob")
    if documents[0] != manifest:
        raise ReadBackError("kubernetes", "the CronJob reads back with other values")


def project_owner(project: Path) -> tuple[int, int]:
    """The uid/gid that own the agent's files (its `.scorpiox/`, else the project folder)."""
    for path in (project / ".scorpiox", project):
        try:
            st = os.stat(path)
        except OSError:
            continue
        return st.st_uid, st.st_gid
    return os.getuid(), os.getgid()
