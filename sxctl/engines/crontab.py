"""The crontab engine: sxctl's marked block (one entry a minute running `cron tick`), read back
the way cron and sh will read it, and installed or removed under a per-user lock."""

from __future__ import annotations

import os
import re
import selectors
import shlex
import shutil
import signal
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from ..errors import (
    ConflictError,
    ErrorCode,
    InvalidDataError,
    NotFoundError,
    SxctlError,
    SystemRefusedError,
    UsageError,
)
from ..fsio import refuse_symlink
from ..locks import writer_lock
from .outside import OUTSIDE_FILE_CAP, read_outside_file, refuse_non_regular, replace_outside_file, xdg_dir
from .values import MARKER, ReadBackError, TickCommand, refuse_value

#: the longest command cron keeps (Debian's cron cuts a longer one silently: MAX_COMMAND 1000)
CRON_COMMAND_MAX = 999
CRONTAB_LOCK_WAIT_S = 30.0
#: how long crontab(1) may take (then it and every process it started are killed: exit 6)
CRONTAB_TIMEOUT_S = 30.0
_LOG_DIR = "${XDG_STATE_HOME:-$HOME/.local/state}/sxctl"
#: the command that sets `--env` variables in a crontab entry: a word of its own for each, which
#: env(1) reads as NAME=VALUE whatever sh's quoting (sh's own `NAME=value` prefix is an
#: assignment only while NAME stays unquoted, which a read-back by words cannot see)
ENV_COMMAND = "/usr/bin/env"


def _cron_word(word: str) -> str:
    """One shell word of a crontab command: shell-quoted, every `%` outside the quotes and
    escaped for cron (`\\%`), so no backslash of the word can ever stand right before it (cron
    reads `\\\\%` as an escaped backslash and an unescaped `%`, which cuts the line)."""
    if "%" not in word:
        return shlex.quote(word)
    return "\\%".join(shlex.quote(piece) if piece else "" for piece in word.split("%"))


def crontab_log(tick: TickCommand) -> str:
    """The crontab entry's default `--log` file, as sh sees it before expanding it: under
    `$XDG_STATE_HOME/sxctl` (default `~/.local/state/sxctl`), one per project."""
    return f"{_LOG_DIR}/tick-{tick.slug}.log"


def crontab_log_path(tick: TickCommand, environ: Mapping[str, str]) -> Path:
    """The entry's log file: `cron export --log FILE`, else the file `crontab_log` names, as sh
    expands it in `environ` after the entry's `cd PROJECT` (a relative XDG_STATE_HOME is the
    project's)."""
    if tick.log is not None:
        return Path(tick.log)
    state = environ.get("XDG_STATE_HOME") or ""
    base = tick.project / state if state and not os.path.isabs(state) else xdg_dir("XDG_STATE_HOME", ".local/state",
                                                                                  environ)
    return base / "sxctl" / f"tick-{tick.slug}.log"


def _crontab_words(tick: TickCommand) -> list[str]:
    """The words sh must see in the crontab's command (what `check_crontab_block` compares): the
    default log last when `--log` was not given."""
    env = [ENV_COMMAND, *(f"{name}={value}" for name, value in tick.env)] if tick.env else []
    log = ["--log", crontab_log(tick)] if tick.log is None else []
    return ["cd", str(tick.project), "&&", *env, *tick.argv(), *log]


_BEGIN_HEAD, _BEGIN_TAIL = "# BEGIN sxctl cron tick for ", f" ({MARKER}; remove with --uninstall)"
_BEGIN = re.compile(re.escape(_BEGIN_HEAD) + "(.+)" + re.escape(_BEGIN_TAIL))


def _begin_line(tick: TickCommand) -> str:
    return f"{_BEGIN_HEAD}{tick.project}{_BEGIN_TAIL}"


def block_projects(text: str) -> list[str]:
    """The project of every sxctl block in a crontab's text (any project's), in order."""
    return [match.group(1) for line in text.split("\n") if (match := _BEGIN.fullmatch(line))]


def _end_line(tick: TickCommand) -> str:
    return f"# END sxctl cron tick for {tick.project}"


def _crontab_note(tick: TickCommand) -> str:
    where = "under $XDG_STATE_HOME/sxctl (default ~/.local/state)" if tick.log is None else "to its --log file"
    return f"# every minute: one scheduler pass, logged {where}, moved to .1 at 1 MiB"


def crontab_block(tick: TickCommand) -> str:
    """sxctl's block for this project (exit 2 when a value cannot be written into a crontab),
    read back the way cron and sh will before it is returned. The pass writes its own log
    (`cron tick --log`, bounded by `TickLog`): the entry redirects nothing, so it never appends
    without end."""
    tick.check("crontab")
    words = _crontab_words(tick)[3:]  # the command after `cd PROJECT &&`
    # the default log is double-quoted for sh to expand it; every other word is quoted as it is
    default_log = f' --log "{crontab_log(tick)}"' if tick.log is None else ""
    quoted = " ".join(_cron_word(word) for word in (words[:-2] if default_log else words))
    command = f"cd {_cron_word(str(tick.project))} && {quoted}{default_log}"
    size = len(command.encode())
    if size > CRON_COMMAND_MAX:
        why = f"the command would be {size} bytes long, and cron keeps at most {CRON_COMMAND_MAX}"
        if tick.env:
            raise UsageError(f"the crontab entry with these --env values would be {size} bytes long, and cron "
                             f"keeps at most {CRON_COMMAND_MAX} (it drops the rest without a word); shorten them, "
                             "or use --target systemd; nothing was written", target="crontab")
        raise refuse_value("the project path", str(tick.project), "crontab", why)
    block = f"{_begin_line(tick)}\n{_crontab_note(tick)}\n* * * * * {command}\n{_end_line(tick)}\n"
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
    if lines[-1] != "" or lines[:-1][0:2] != [_begin_line(tick), _crontab_note(tick)] or len(lines) != 5 \
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
                                 "fix it with `crontab -e`", code=ErrorCode.INVALID_DATA)
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
            raise SxctlError(f"crontab -l failed: {err}", code=ErrorCode.INTERNAL)
        return _decode(done.stdout)

    def write(self, text: str) -> None:
        if self.file is not None:
            replace_outside_file(self.file, _encode(text))
            return
        done = self._crontab("-", _encode(text))
        if done.returncode != 0:
            raise SxctlError(f"crontab - failed: {done.stderr.decode('utf-8', 'replace').strip()}",
                code=ErrorCode.INTERNAL)

    @staticmethod
    def _crontab(arg: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
        """crontab(1) found on PATH the way a shell finds it: a PATH folder that cannot be searched
        (or a `crontab` there that cannot be run) is passed over, not reported as the crontab's
        failure. Run in a process group of its own, its output read up to `OUTSIDE_FILE_CAP` bytes
        within `CRONTAB_TIMEOUT_S`: past either, the whole group is killed (exit 5, exit 6)."""
        program = shutil.which("crontab")
        if program is None:
            raise NotFoundError("crontab(1) is not installed here; install cron, or use --target systemd "
                                "(or --crontab-file FILE)", code=ErrorCode.FILE_NOT_FOUND)
        try:
            proc = subprocess.Popen([program, arg], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True)
        except OSError as error:
            raise SystemRefusedError.from_os_error(error, "cannot run crontab(1)") from None
        try:
            out, err = _read_capped(proc, stdin, f"crontab {arg}")
        finally:
            _kill_group(proc)  # whatever it left running, even once it answered
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
        return subprocess.CompletedProcess([program, arg], proc.returncode, out, err)


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill crontab(1) and every process it started (its own process group: a pid that leads a
    group is not reused while the group has members), and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:  # the group is gone already
        pass
    proc.wait()


def _feed(pipe, data: bytes) -> None:
    """Write crontab(1)'s standard input (from a thread: it may not read it all before it writes)."""
    try:
        pipe.write(data)
        pipe.close()
    except OSError:  # it exited, or closed its input: what it said tells
        pass


def _read_capped(proc: subprocess.Popen, stdin: bytes, what: str) -> tuple[bytes, bytes]:
    """(stdout, stderr) of `proc` once it closed both and exited: refused past `OUTSIDE_FILE_CAP`
    bytes on either (exit 5) or after `CRONTAB_TIMEOUT_S` (exit 6); never read without end."""
    deadline = time.monotonic() + CRONTAB_TIMEOUT_S
    threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True).start()
    assert proc.stdout is not None and proc.stderr is not None  # Popen with PIPE
    out, err = proc.stdout.fileno(), proc.stderr.fileno()
    got = {out: bytearray(), err: bytearray()}
    with selectors.DefaultSelector() as selector:
        for fd in got:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise SxctlError(f"{what} did not finish within {CRONTAB_TIMEOUT_S:g} s", code=ErrorCode.TIMEOUT)
            for key, _ in selector.select(left):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fd)
                    continue
                got[key.fd] += chunk
                if len(got[key.fd]) > OUTSIDE_FILE_CAP:
                    raise InvalidDataError(what, f"its output is larger than {OUTSIDE_FILE_CAP} bytes; "
                                           "not read further")
    try:
        proc.wait(max(deadline - time.monotonic(), 0))
    except subprocess.TimeoutExpired:
        raise SxctlError(f"{what} did not finish within {CRONTAB_TIMEOUT_S:g} s", code=ErrorCode.TIMEOUT) from None
    return bytes(got[out]), bytes(got[err])


def crontab_lock_folder() -> Path:
    """`/tmp/sxctl-<uid>`: one folder per user id, whatever HOME or XDG_STATE_HOME say. A crontab
    belongs to the user id, so every sxctl that edits it — another shell with another HOME, `sudo`
    without `-H` — must meet at the same lock. Made 0700; refused (exit 5) unless it is a real
    folder of this user that nobody else may enter (as tmux does with /tmp/tmux-<uid>)."""
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
                         code=ErrorCode.INVALID_DATA, file=folder)
    return folder


def crontab_lock():
    """The lock every sxctl process of this user takes around its crontab edit (read, write,
    read back): `/tmp/sxctl-<uid>/crontab.lock`, held up to 30 s (exit 4)."""
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
                                code=ErrorCode.LOST_UPDATE)
    return True


def install_crontab(tick: TickCommand, crontab: Crontab, check: Callable[[str], None] | None = None) -> bool:
    """Put sxctl's block in the crontab (replacing an older one, and any copy of it); False when
    it was there as is. `check(text)` sees the crontab first, under the lock, and may refuse."""
    block = crontab_block(tick)

    def edit(text: str) -> str:
        if check is not None:
            check(text)
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
