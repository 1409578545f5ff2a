"""sxctl's installed crontab entry (or systemd unit) for a project, read back: the variables and
pass options it carries — what `cron export` must be given again to keep them (`--env`, `--ping-url`,
`--metrics-file`, `--log`) — and what in it export cannot write (a pass option or a schedule
edited in by hand). `--install` refuses to drop any of them (`refuse_dropping`; a unit's:
`installed_unit`, `refuse_losing`); `doctor`
compares the whole block with the one export would write now (health/engine_checks.py)."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, replace

from ..errors import UsageError
from .crontab import ENV_COMMAND, blocks_in, cron_command, crontab_log
from .systemd import read_unit
from .values import ENV_NAME, MARKER, TickCommand

#: the options every exported entry passes
_FIXED = ("--busy-ok", "-q")
#: the options export carries: flag -> TickCommand field
CARRIED = {"--ping-url": "ping_url", "--metrics-file": "metrics_file", "--log": "log"}


@dataclass(frozen=True)
class InstalledEntry:
    """sxctl's block for a project as installed (`block`) and what its entry runs; `readable`
    False when its command is not in the shape sxctl writes (then the rest is empty)."""

    block: str
    readable: bool
    python: str | None = None
    workspace: str | None = None  # its --workspace (None: the project is the workspace)
    env: tuple[tuple[str, str], ...] = ()
    ping_url: str | None = None
    metrics_file: str | None = None
    log: str | None = None  # its --log when that is not the export's default
    #: what export cannot write, each in words (`--max-per-pass 5`, `the schedule */5 * * * *`)
    foreign: tuple[str, ...] = ()

    def kept(self, tick: TickCommand) -> TickCommand:
        """`tick` with this entry's variables and pass options: what export writes to keep them."""
        return replace(tick, env=self.env, ping_url=self.ping_url, metrics_file=self.metrics_file, log=self.log)

    def carried_flags(self) -> list[tuple[str, str]]:
        """The options `cron export` needs to write them again: (`--env`, `NAME=VALUE`), (`--ping-url`,
        URL), … in the order export takes them."""
        return [("--env", f"{name}={value}") for name, value in self.env] + [
            (flag, getattr(self, field)) for flag, field in CARRIED.items() if getattr(self, field) is not None]


def installed_entry(text: str, tick: TickCommand) -> InstalledEntry | None:
    """sxctl's (first) block for `tick.project` in a crontab's text, read back; None without one."""
    blocks = blocks_in(text, tick)
    if not blocks:
        return None
    lines = [line for line in blocks[0].split("\n")[1:-2] if line.strip() and not line.lstrip().startswith("#")]
    fields = lines[0].split(None, 5) if len(lines) == 1 else []
    if len(fields) != 6:
        return InstalledEntry(blocks[0], False)
    command, stdin = cron_command(fields[5])
    try:
        words = shlex.split(command) if stdin is None else None
    except ValueError:
        words = None
    found = _read_words(words, tick) if words else None
    if found is None:
        return InstalledEntry(blocks[0], False)
    if fields[:5] != ["*"] * 5:
        found["foreign"].insert(0, f"the schedule {' '.join(fields[:5])}")
    return InstalledEntry(blocks[0], True, **{**found, "foreign": tuple(found["foreign"])})


def _read_words(words: list[str], tick: TickCommand) -> dict | None:
    """The entry's parts from sh's words (`cd P && [env N=V…] PYTHON -m sxctl … cron tick …`),
    None when they are not in that shape."""
    if words[:1] != ["cd"] or words[2:3] != ["&&"]:
        return None
    foreign = [] if words[1] == str(tick.project) else [shlex.join(words[:2])]
    at, env = 3, []
    if words[at:at + 1] == [ENV_COMMAND]:
        at += 1
        while at < len(words) and ENV_NAME.fullmatch(words[at].partition("=")[0]) and "=" in words[at]:
            name, _, setting = words[at].partition("=")
            env.append((name, setting))
            at += 1
    found = _read_command(words[at:], tick)
    if found is not None:
        found["foreign"][:0] = foreign
        found["env"] = tuple(env)
    return found


def _read_command(words: list[str], tick: TickCommand) -> dict | None:
    """The pass's parts from its command (`PYTHON -m sxctl [--project P] [--workspace W] cron tick
    …`: the crontab entry's after its variables, a unit's ExecStart=), None in another shape."""
    foreign: list[str] = []
    if words[1:3] != ["-m", "sxctl"]:
        return None
    python, at = words[0], 3
    try:
        cron = words.index("cron", at)
    except ValueError:
        return None
    if words[cron + 1:cron + 2] != ["tick"]:
        return None
    globals_, workspace = words[at:cron], None
    if globals_[:2] == ["--project", str(tick.project)]:
        globals_ = globals_[2:]
    if globals_[:1] == ["--workspace"] and len(globals_) > 1:
        workspace, globals_ = globals_[1], globals_[2:]
    foreign += [shlex.join(group) for group in _options(globals_)]
    rest = words[cron + 2:]
    if rest[-3:] == [">>", crontab_log(tick), "2>&1"]:  # an older sxctl's log: the default one now
        rest = rest[:-3]
    carried: dict[str, str] = {}
    for group in _options(rest):
        flag, given, inline = group[0].partition("=")
        value: str | None = inline if given else (group[1] if len(group) > 1 else None)
        if group == [flag] and flag in _FIXED or flag == "--log" and value == crontab_log(tick):
            continue  # what every exported entry has (the default log is export's own)
        if flag in CARRIED and value is not None and flag not in carried and _carriable(flag, value):
            carried[flag] = value
        else:
            foreign.append(shlex.join(group))
    return {"python": python, "workspace": workspace, "env": (), "ping_url": carried.get("--ping-url"),
            "metrics_file": carried.get("--metrics-file"), "log": carried.get("--log"), "foreign": foreign}


def _options(words: list[str]) -> list[list[str]]:
    """Words grouped as options: an option with the word after it when that is not an option
    (`--max-per-pass 5`), any other word alone."""
    groups, at = [], 0
    while at < len(words):
        takes = words[at].startswith("--") and "=" not in words[at] and at + 1 < len(words) \
            and not words[at + 1].startswith("-")
        groups.append(words[at:at + (2 if takes else 1)])
        at += 2 if takes else 1
    return groups


def _carriable(flag: str, value: str) -> bool:
    """Whether export can write this option again as it is: a ping URL it takes, or an absolute
    path without `$` (export quotes every word: sh would no longer expand it)."""
    if flag == "--ping-url":
        from ..cron.run.pings import url_rule  # urllib loads only for pings

        return url_rule(value) is None
    return os.path.isabs(value) and "$" not in value


def installed_unit(text: str, tick: TickCommand) -> InstalledEntry | None:
    """sxctl's service unit for `tick.project` as installed (its text), read back the way systemd
    reads it: its `Environment=` variables and the pass options of its `ExecStart=`; None when it
    is not sxctl's."""
    if MARKER not in text:
        return None
    settings = read_unit(text)
    unreadable = any(section == "?" for section, _ in settings)  # a line systemd reads otherwise than sxctl
    found = None if unreadable else _read_command(settings.get(("Service", "ExecStart"), []), tick)
    if found is None:
        return InstalledEntry(text, False)
    pairs = [word.partition("=") for word in settings.get(("Service", "Environment"), [])]
    found["env"] = tuple((name, value) for name, _, value in pairs)
    return InstalledEntry(text, True, **{**found, "foreign": tuple(found["foreign"])})


def refuse_dropping(text: str, tick: TickCommand) -> None:
    """`--install`, before it writes over this project's installed crontab entry (`text`: the
    crontab): `refuse_losing` what it has."""
    refuse_losing(installed_entry(text, tick), tick, "the installed crontab entry", "crontab")


def refuse_losing(entry: InstalledEntry | None, tick: TickCommand, what: str, target: str) -> None:
    """`--install`, before it writes over this project's installed entry or unit (`what`): exit 2
    when that would drop a variable or a carried option `tick` lacks (named by its name, a ping
    URL masked), or what export cannot write, saying how to keep or drop each; nothing is
    written."""
    if entry is None or not entry.readable:
        return
    from ..cron.run.pings import mask_url  # urllib loads only for pings

    names = {name for name, _ in tick.env}
    lost = [f"--env {name}=…" for name, _ in entry.env if name not in names]
    for flag, field in CARRIED.items():
        value = getattr(entry, field)
        if value is not None and getattr(tick, field) is None:
            lost.append(f"{flag} {mask_url(value) if flag == '--ping-url' else shlex.quote(value)}")
    said = []
    if lost:
        said.append(f"{', '.join(lost)}, which this --install would drop: give them again to keep them (the "
                    f"installed {'line' if target == 'crontab' else 'unit'} shows the values), or run --uninstall "
                    "first to drop them")
    if entry.foreign:
        said.append(f"{', '.join(entry.foreign)}, which cron export cannot write: keep the line as it is, or run "
                    "--uninstall first to drop it")
    if said:
        raise UsageError(f"{what} for {tick.project} has {'; and '.join(said)}; nothing was written",
                         target=target)
