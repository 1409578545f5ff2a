"""The values that reach a generated file: each passes `check_value` first, so a value the
target format cannot hold safely is refused (exit 2, naming it and the target), never emitted;
and `TickCommand`, what every engine runs."""

from __future__ import annotations

import hashlib
import os
import re
import sys
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..cron.policy.hosts import HOST_ENV, check_host_name
from ..errors import ErrorCode, SxctlError, UsageError

TARGETS = ("crontab", "systemd", "kubernetes")
MARKER = "managed by `sxctl cron export --install`"


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
                         "nothing was written", code=ErrorCode.INVALID_VALUE, target=target)


@dataclass
class TickCommand:
    """What every engine runs: this installation's interpreter, the project, the workspace."""

    project: Path
    workspace: Path
    python: str = field(default_factory=lambda: os.path.abspath(sys.executable))
    #: `--env NAME=VALUE`: variables the engine sets for the pass (checked by `check_env`)
    env: tuple[tuple[str, str], ...] = ()
    #: the pass's own options the line carries (`cron export --ping-url/--metrics-file/--log`;
    #: the paths absolute): a re-install keeps them only when given again
    ping_url: str | None = None
    metrics_file: str | None = None
    log: str | None = None

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
        return [*args, "cron", "tick", "--busy-ok", "-q", *self.pass_options()]

    def pass_options(self) -> list[str]:
        """`--ping-url URL`, `--metrics-file FILE`, `--log FILE`: those given, in this order."""
        words = []
        for flag, value in (("--ping-url", self.ping_url), ("--metrics-file", self.metrics_file), ("--log", self.log)):
            if value is not None:
                words += [flag, value]
        return words

    def check(self, target: str) -> None:
        """Exit 2 when a path, a variable or an option of this command cannot go into a `target`
        file."""
        check_value("the project path", str(self.project), target)
        check_value("the workspace path", str(self.workspace), target)
        check_value("the interpreter path", self.python, target)
        check_env(self.env, target)
        self.check_options(target)

    def check_options(self, target: str) -> None:
        """Exit 2 when a pass option (`pass_options`) cannot go into a `target` file (the ping URL
        named masked: its path is often the secret)."""
        if self.ping_url is not None and unsafe_reason(self.ping_url) is not None:
            from ..cron.run.pings import mask_url  # urllib loads only for pings

            raise UsageError(f"--ping-url {mask_url(self.ping_url)} cannot be written into a {target} configuration: "
                             f"{unsafe_reason(self.ping_url)}; nothing was written", target=target)
        for what, path in (("--metrics-file", self.metrics_file), ("--log", self.log)):
            if path is not None:
                check_value(what, path, target)


ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_env(pairs: Iterable[tuple[str, str]], target: str) -> tuple[tuple[str, str], ...]:
    """`--env NAME=VALUE` pairs, in order, when every one may reach a `target` file: NAME a
    variable name (letters, digits, `_`, not starting with a digit), given once; VALUE passes
    `check_value` (each target's own quoting and its read-back do the rest), and `SXCTL_HOST` a
    host name the pass accepts. Else exit 2."""
    seen: dict[str, str] = {}
    for name, value in pairs:
        if not ENV_NAME.fullmatch(name):
            raise UsageError(f"--env: {shown(name)} is not a variable name (letters, digits and '_', not starting "
                             "with a digit); nothing was written", value=shown(name)[1:-1],
                             target=target)
        if name in seen:
            raise UsageError(f"--env {name} is given twice; give each variable once", target=target)
        seen[name] = check_value(f"--env {name}", value, target)
    if HOST_ENV in seen:  # every pass would exit 2 on it
        check_host_name(seen[HOST_ENV], f"--env {HOST_ENV}")
    return tuple(seen.items())
