"""Reading a schedule file (`sxctl.toml`, TOML): one table per job under `[jobs]`, keyed as the
flags of `cron add`, and the workspace's own settings under `[workspace]`. Every value is checked
as the flag would be and normalized (schedule_file/declared.py); anything wrong is one line naming
the file, the line when it can be found, the key and what is wrong (exit 2, like a mistyped flag)."""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import tomllib
import unicodedata
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime, time
from pathlib import Path
from typing import Any

from ...errors import NotFoundError, SxctlError, UsageError
from ...fsio import in_owned_folder, read_data_file
from ...timeparse import parse_duration_ms, parse_time_in_zone_ms, parse_time_ms
from ..policy.file import PolicyOptions, apply_options, parse_active_days
from ..policy.keys import unsafe_text
from ..run.pings import check_ping_url
from ..spend.rules import GuardOptions
from ..store.authoring import PAYLOAD_KINDS, TEXT_LIMIT, WAKE_GATE_LIMIT, check_name
from ..store.schema_kit import MAX_SAFE_INT
from ..store.targets import stored_project
from ..timeline.schedule import CronPattern, honoured_zone_name
from .declared import DAYS, KEPT, KEYS, SOURCES, default_of
from .lines import KeyLines
from .workspace_table import WorkspaceTable

DEFAULT_NAME = "sxctl.toml"
MAX_KEY_PARTS = 16  # `[jobs.NAME]` and `jobs.NAME.key` have a few
FILE_CAP = 1024 * 1024  # a schedule file of 1,000 jobs with long prompts is well under this
#: keys a file may not give, and what to give instead
#: the bounds of the whole-number keys (the flags' ranges; comis's and the policy file's)
INT_RANGES = {"max-unconsumed": (0, 1000), "max-runs-per-day": (0, 100_000), "max-runs": (0, MAX_SAFE_INT),
              "max-dependency-errors": (0, MAX_SAFE_INT), "max-history-turns": (1, 20),
              "max-session-tokens": (0, MAX_SAFE_INT), "max-tokens-per-day": (0, MAX_SAFE_INT),
              "rate-limit-ceiling": (0, 1)}
#: the words a flag takes for "none" (the default): the same value as leaving the key out
CLEARS = {"until": ("none",), "active-hours": ("none",), "active-days": ("none",), "host": ("any",),
          "on-missing-usage": ("default",)}
#: keys people write for another one
ALIASES = {"timezone": "tz", "zone": "tz", "TZ": "tz", "message": "text", "prompt": "text", "expr": "cron",
           "schedule": "cron", "interval": "every", "project": "to-project", "session": "to"}
REFUSED = {"ping-url": "give ping-url-env = \"VARIABLE\": a ping URL is a secret, read from the environment",
           "in": "give at = TIME: a schedule file has no `now` to count from",
           "new-name": "rename the table: a job is its table's name"}


@dataclass
class ScheduleFile:
    """A schedule file, read and checked: its `jobs` (name -> declared form, every key filled in;
    `anchor` None when the file leaves it out), the `workspace` settings it names (key -> value,
    as the policy file keeps them), and its sha256 `digest`."""

    path: Path
    digest: str
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    workspace: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what it leaves as it is here (an unset variable)


class _Reader(WorkspaceTable):
    """The checks of one file, with its path and lines for the messages."""

    def __init__(self, path: Path, text: str, environ: Mapping[str, str], now_ms: int, workspace: Path):
        self.path, self.lines, self.environ, self.now_ms, self.root = path, KeyLines(text), environ, now_ms, workspace
        self.gate_language = "js"
        self.notes: list[str] = []  # what the file leaves as it is here (an unset ping URL variable)
        self.url_kept = False  # the job being read keeps the ping URL it has (its variable is not set here)

    @contextmanager
    def about(self, where: tuple[str, ...], key: str | None) -> Iterator[None]:
        """A check of one key: its error names the key (and its line)."""
        try:
            yield
        except UsageError as error:
            raise self.error(where, key, error.message, hint=error.extra.get("hint")) from None

    def error(self, table: tuple[str, ...], key: str | None, message: str, hint: str | None = None) -> UsageError:
        line = self.lines.find(table, key)
        where = f"{self.path}:{line}" if line is not None else str(self.path)
        name = ".".join((*table, key) if key else table)
        return UsageError(f"{where}: {name}: {message}", hint=hint)

    def unknown(self, table: tuple[str, ...], key: str, known: list[str]) -> UsageError:
        if key in REFUSED:
            return self.error(table, key, "not a key of a schedule file", hint=REFUSED[key])
        close = [ALIASES[key]] if ALIASES.get(key) in known else difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        hint = f"a job takes the keys of `cron add`: {', '.join(known)}" if table[:1] == ("jobs",) else \
            f"the keys here: {', '.join(known)}"
        return self.error(table, key, "unknown key" + (f" (did you mean {close[0]!r}?)" if close else ""),
                          hint=None if close else hint)

    # --- the jobs ---------------------------------------------------------------------------------

    def job(self, name: str, table: Any) -> dict[str, Any]:
        where = ("jobs", name)
        if not isinstance(table, dict):
            raise self.error(where, None, "must be a table ([jobs.NAME] and its keys)")
        try:
            check_name(name)
        except UsageError as error:
            raise self.error(where, None, error.message) from None
        if (why := name_rule(name)) is not None:
            raise self.error(where, None, f"not a job name: {why}")
        known = sorted([*(k for k in KEYS if k != "ping-url"), *SOURCES])
        for key in table:
            if key not in known:
                raise self.unknown(where, key, known)
        values: dict[str, Any] = {}
        for key, value in table.items():
            target: str = SOURCES.get(key) or key
            if target in values or (target != key and target in table):
                raise self.error(where, key, f"give {target} or {key}, not both")
            read = self.source(where, key, value) if key in SOURCES else self.value(where, key, value)
            if read is not None or key == "ping-url-env":  # `until = "none"`: as if left out
                values[target] = read
        gate = table.get("wake-gate")
        self.gate_language = "ts" if isinstance(gate, str) and gate.endswith((".ts", ".mts")) else "js"
        kept = ["anchor"] if "anchor" not in table else []
        kept += ["paused"] if "paused" not in table else []
        kept += ["agent"] if "agent" not in table else []
        self.url_kept = "ping-url-env" in table and values["ping-url"] is None and \
            table["ping-url-env"] not in self.environ  # the job's URL stays: unknown here
        kept += ["ping-url"] if self.url_kept else []
        declared = self.declared(where, values)
        declared[KEPT] = kept
        return declared

    def source(self, where: tuple[str, ...], key: str, value: Any) -> Any:
        """A value the file points at: an environment variable, or a file in the schedule file's
        folder (or below it: a file elsewhere is refused — a change to the file in review must not
        read a secret into a job's message; links are followed, as a ConfigMap mount needs)."""
        if not isinstance(value, str) or not value:
            raise self.error(where, key, "must be a variable name" if key == "ping-url-env" else "must be a file name")
        if key == "ping-url-env":
            if value not in self.environ:  # the job's URL is left as it is (KEPT)
                self.notes.append(f"jobs.{where[1]}: {value} is not set here: its ping URL is left as the job has it")
                return None
            url = self.environ[value]
            if url == "none":
                return None
            with self.about(where, key):
                check_ping_url(url)
            return url
        if "\x00" in value:
            raise self.error(where, key, "a file name has no NUL character")
        folder = os.path.realpath(self.path.parent)
        path = Path(os.path.realpath(self.path.parent / value))
        if not str(path).startswith(folder + os.sep):
            raise self.error(where, key, f"{value} is not in the schedule file's folder {folder}: a {key} is read "
                             "from beside the schedule file (or below it)")
        if in_owned_folder(self.path.parent / value, (self.root / ".scheduler", self.root / ".scorpiox")):
            raise self.error(where, key, f"{value} is one of the agent's or the scheduler's files, whose contents "
                             "(a ping URL, a message) must not become a job's")
        cap = TEXT_LIMIT if key == "text-file" else WAKE_GATE_LIMIT
        try:
            data = read_data_file(path, cap)
        except SxctlError as error:
            raise self.error(where, key, f"cannot read {value}: {error.message}") from None
        if data is None:
            raise self.error(where, key, f"no file {value}")
        if key == "text-file":  # one trailing line break removed, as `cron add --text-file` does
            data = data[:-2] if data.endswith(b"\r\n") else data[:-1] if data.endswith(b"\n") else data
        if len(data) > cap:
            raise self.error(where, key, f"{value} is larger than {cap // 1024} KiB")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise self.error(where, key, f"{value} is not UTF-8 text") from None

    def value(self, where: tuple[str, ...], key: str, value: Any) -> Any:
        """A key's TOML value, of the type its kind takes, normalized."""
        kind = KEYS[key]
        if isinstance(value, (dict, list)) and not (kind == "days" and isinstance(value, list)):
            raise self.error(where, key, "must be a single value, not a table or an array")
        if kind == "bool":
            if not isinstance(value, bool):
                raise self.error(where, key, "must be true or false")
            return value
        if kind in ("int", "fraction"):
            if isinstance(value, bool) or not isinstance(value, (int, float) if kind == "fraction" else int):
                raise self.error(where, key, "must be a number" if kind == "fraction" else "must be a whole number")
            low, high = INT_RANGES.get(key, (0, 1))
            if not low <= value <= high:
                raise self.error(where, key, f"must be from {low} to {high}")
            return value
        if kind == "duration":
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                raise self.error(where, key, 'must be a duration: "30m", "1h30m", or a number of seconds')
            with self.about(where, key):
                if isinstance(value, str):
                    ms = parse_duration_ms(value, what=key)
                elif not (value == value and abs(value) < 2**53 / 1000):  # NaN, inf, beyond every bound
                    raise UsageError(f"invalid {key} {value!r}: out of range")
                else:
                    ms = round(value * 1000)
                if ms < 0:
                    raise UsageError(f"invalid {key} {value!r}: a length of time is not negative")
                return ms
        if kind == "time" and isinstance(value, (datetime, date, time)):
            value = value.isoformat()  # an unquoted TOML date-time: read as its text
        if kind == "days":
            value = ",".join(value) if isinstance(value, list) and all(isinstance(v, str) for v in value) else value
        if not isinstance(value, str):
            raise self.error(where, key, "must be a string")
        if not value:
            raise self.error(where, key, "must not be empty (leave the key out for its default)")
        if kind != "text" and (why := unsafe_text(value)) is not None:
            raise self.error(where, key, f"not a value sxctl keeps: {why}")
        if value.casefold() in CLEARS.get(key, ()):
            return None  # the flag's word for "not set" (`--until none`, `--host any`): the default
        return value

    def declared(self, where: tuple[str, ...], values: dict[str, Any]) -> dict[str, Any]:
        """The job's declared form: its values checked as `cron add` checks its flags, each error
        naming its key, normalized; the keys it leaves out filled in with their defaults."""
        with self.about(where, "payload"):
            payload = values.get("payload", "agent-turn")
            if payload not in PAYLOAD_KINDS:
                raise UsageError(f"invalid payload {payload!r}: use agent-turn, delivery or heartbeat-event")
            payload = PAYLOAD_KINDS[payload].replace("_", "-")
        if not values.get("text"):
            raise self.error(where, None, "text is required (text = \"...\" or text-file = \"FILE\")")
        declared = {key: default_of(key, payload) for key in KEYS}
        declared.update(values, payload=payload, agent=values.get("agent"))  # no agent: the command's
        schedules = [key for key in ("cron", "every", "at") if key in values]
        if len(schedules) != 1:
            raise self.error(where, schedules[1] if schedules else None,
                             "a job needs exactly one schedule: cron, every or at")
        with self.about(where, "tz"):
            declared["tz"] = honoured_zone_name(values.get("tz", "UTC"),
                                                message="Invalid cron timezone" if "cron" in values
                                                else "Invalid wall-clock timezone")
        fold = values.get("fold")
        if fold not in (None, "earlier", "later"):
            raise self.error(where, "fold", f"invalid fold {fold!r}: earlier or later")
        if fold is not None and "at" not in values and "anchor" not in values:
            raise self.error(where, "fold", "fold picks one reading of an ambiguous at or anchor time")
        if values.get("tz") == "local":
            raise self.error(where, "tz", "give an IANA zone (e.g. Europe/Berlin): `local` is each host's own, and "
                             "one file is applied on many hosts")
        if "cron" in values:
            with self.about(where, "cron"):
                CronPattern.parse(values["cron"])
        for key in ("at", "anchor"):
            if key in values:
                with self.about(where, key):
                    declared[key] = parse_time_ms(values[key], tz=values.get("tz"), fold=fold, now_ms=self.now_ms)[0]
        if "anchor" in values and "every" not in values:
            raise self.error(where, "anchor", "anchor is for an every schedule")
        self._check_kind(where, declared, values)
        if "to-project" in values:
            declared["to-project"] = stored_project(self.path.parent / values["to-project"], self.root)
        if "until" in values:
            if "at" in values:
                raise self.error(where, "until", "until is for recurring jobs (a one-shot runs once)")
            with self.about(where, "until"):
                declared["until"] = parse_time_in_zone_ms(values["until"], declared["tz"], self.now_ms)
        if "active-days" in values:
            with self.about(where, "active-days"):
                days = parse_active_days(values["active-days"])
            declared["active-days"] = None if tuple(days) == DAYS else ",".join(days)
        if declared.get("active-hours") == "00:00-24:00":
            declared["active-hours"] = None
        if declared["catch-up"] != "skip":
            declared["stale-after"] = None
        for key in ("max-unconsumed", "max-runs-per-day", "max-runs", "jitter", "rate-limit-ceiling",
                    "max-session-tokens", "max-tokens-per-day", "expires", "read-within"):
            if declared.get(key) == 0:
                declared[key] = None  # 0 is no limit, as the flag says
        if declared.get("host") == "any":
            declared["host"] = None
        self._check_policy(where, declared, values)
        return declared

    def _check_kind(self, where: tuple[str, ...], declared: dict[str, Any], values: dict[str, Any]) -> None:
        """Keys only some payload kinds take (comis's `X is valid only for Y payloads`), and the
        wake gate's defaults."""
        payload = declared["payload"]
        agent_only = ("model", "timeout-seconds", "session-strategy", "max-history-turns", "continuation",
                      "wake-gate-script", "wake-gate-language", "wake-gate-timeout")
        for key in values:
            if ((key in agent_only and payload != "agent-turn") or (key == "wake-mode" and payload != "heartbeat-event")
                    or (key in ("to", "to-project", "tenant") and payload == "heartbeat-event")):
                raise self.error(where, key, f"not a key of {'an' if payload[0] in 'aeiou' else 'a'} {payload} job")
        if "wake-gate-script" in values:
            declared["wake-gate-language"] = values.get("wake-gate-language", self.gate_language)
        elif "wake-gate-language" in values or "wake-gate-timeout" in values:
            raise self.error(where, "wake-gate-language" if "wake-gate-language" in values else "wake-gate-timeout",
                             "needs wake-gate = FILE (or wake-gate-script)")
        else:
            declared["wake-gate-language"] = declared["wake-gate-timeout"] = None

    def _check_policy(self, where: tuple[str, ...], declared: dict[str, Any], values: dict[str, Any]) -> None:
        """The policy values, checked by the same rules as the flags of `cron add` (the message
        names the flag; the error, its key)."""
        seconds = {key: None if values.get(key) is None else values[key] / 1000
                   for key in ("hold-max", "stale-after", "jitter", "expires", "read-within")}
        try:
            apply_options({}, PolicyOptions(
                hold_max=seconds["hold-max"], catch_up=values.get("catch-up"), stale_after=seconds["stale-after"],
                missed_note=values.get("missed-note"), max_unconsumed=values.get("max-unconsumed"),
                max_runs_per_day=values.get("max-runs-per-day"), max_runs=values.get("max-runs"),
                active_hours=values.get("active-hours"), active_days=values.get("active-days"),
                overlap=values.get("overlap"), jitter=seconds["jitter"], host=values.get("host"),
                expires=seconds["expires"], read_within=seconds["read-within"], ping_url=values.get("ping-url"),
                ping_on=None if self.url_kept else values.get("ping-on"),
                guards=GuardOptions(values.get("rate-limit-ceiling"), values.get("max-session-tokens"),
                                    values.get("max-tokens-per-day"), values.get("on-missing-usage"))),
                tz=declared["tz"], now_ms=self.now_ms, recurring="at" not in values)
        except UsageError as error:
            key = next((k for k in values if f"--{k}" in error.message), None)
            raise self.error(where, key, error.message, hint=error.extra.get("hint")) from None


def name_rule(name: str) -> str | None:
    """Why a job name cannot be in a schedule file (None: it can): a character that drives a
    terminal or that a review cannot see (zero-width, bidi, BOM, tags, unassigned, private use)."""
    why = unsafe_text(name)
    if why is not None:
        return why
    hidden = next((ch for ch in name if unicodedata.category(ch) in ("Cf", "Cn", "Co")), None)
    return None if hidden is None else f"it holds U+{ord(hidden):04X}, which a review cannot see"


def read_schedule_file(path: Path, *, environ: Mapping[str, str] = os.environ, now_ms: int,
                       workspace: Path) -> ScheduleFile:
    """The schedule file at `path`, checked (exit 2 naming the file, line and key; exit 3 when
    there is none), for the workspace folder `workspace` (target projects are stored relative to it)."""
    raw = read_data_file(Path(os.path.realpath(path)), FILE_CAP)  # a link is followed (a ConfigMap mount)
    if raw is None:
        raise NotFoundError(f"no schedule file at {path}", hint="give -f FILE, or write one from today's jobs: "
                            f"sxctl cron dump > {DEFAULT_NAME}")
    text, doc = parse_toml(path, raw)
    reader = _Reader(path, text, environ, now_ms, workspace)
    for key in doc:
        if key not in ("jobs", "workspace"):
            raise reader.unknown((), key, ["jobs", "workspace"])
    jobs = doc.get("jobs", {})
    if not isinstance(jobs, dict):
        raise reader.error(("jobs",), None, "must be a table of jobs ([jobs.NAME])")
    found = ScheduleFile(path, content_digest(doc))
    found.jobs = {name: reader.job(name, table) for name, table in jobs.items()}
    if "workspace" in doc:
        found.workspace = reader.workspace(doc["workspace"])
    found.notes = reader.notes
    return found


def parse_toml(path: Path, raw: bytes) -> tuple[str, dict[str, Any]]:
    """The file's text and its TOML document (exit 2 when it is too big, not UTF-8 or not TOML)."""
    if len(raw) > FILE_CAP:
        raise UsageError(f"{path}: larger than {FILE_CAP // 1024} KiB: not a schedule file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw[:error.start].count(b"\n") + 1
        raise UsageError(f"{path}:{line}: not UTF-8 text (byte {error.start})") from None
    deep = re.compile(rf"\s*\[*\s*[\w\"'-]+(?:\s*\.\s*[\w\"'-]+){{{MAX_KEY_PARTS},}}")
    for number, row in enumerate(text.splitlines(), 1):
        if deep.match(row):  # TOML's reader slows past any bound on dotted keys: 40,000 parts took 22 s
            raise UsageError(f"{path}:{number}: not a schedule file: a key of more than {MAX_KEY_PARTS} dotted parts")
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise UsageError(f"{path}: not valid TOML: {error}") from None
    except RecursionError:
        raise UsageError(f"{path}: not a schedule file: values nested too deeply") from None


def content_digest(doc: dict[str, Any]) -> str:
    """The digest of what a schedule file says (its TOML document, not its bytes: a comment or a
    blank line changes nothing), kept by the apply that read it."""
    encoded = json.dumps(doc, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass")
    return "sha256:" + hashlib.sha256(encoded).hexdigest()
