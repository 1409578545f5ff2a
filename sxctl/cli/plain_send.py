"""`sxctl inbox send TEXT` in its plain forms, without click: the command shell loops and crontabs
run most, so it starts in less time than `python -c "import click"` alone (0.93–0.97 of it, where the
click command line takes about 1.5; issue #27, docs/performance.md).

A plain form is the global options (`--project`, `--session`, `--workspace`, `--agent`, `--json`,
`--no-color`, `-q`, `-v` and their long names), `inbox`, `send`, one TEXT that does not start
with `-`, and `--mode`, `--priority`, `--stem`, `--key`, `--no-wait`, `--follow`, each value written as click
would take it unchanged. Anything else — help, another option, a value click would convert or
refuse, stdin, shell completion — returns None from `parse`, and the click command runs it
instead, so every error and every other form keeps its one definition there. The options named
here are held to the click definitions by tests/cli/test_plain_send.py."""

from __future__ import annotations

import os

TYPE_CHECKING = False  # this module's point is a fast start: not even `typing` at run time
if TYPE_CHECKING:
    from ..api.inbox import SendResult

#: the global options that take a value, and the `Settings` attribute each fills (output.py)
GLOBAL_VALUES = {"--project": "project", "--session": "session", "--workspace": "workspace", "--agent": "agent"}
#: the global flags, and the `Settings` attribute each sets
GLOBAL_FLAGS = {"--json": "json", "--no-color": "no_color", "-q": "quiet", "--quiet": "quiet", "-v": "verbose",
                "--verbose": "verbose"}
#: the options of `inbox send` a plain form may carry
SEND_VALUES = ("--mode", "--priority", "--stem", "--key")
SEND_FLAGS = ("--no-wait", "--follow")


class PlainSend:
    """One plain `inbox send` command line, parsed as click would parse it."""

    def __init__(self) -> None:
        self.settings: dict[str, str | bool] = {}  # the global options given: `Settings` attributes
        self.text = ""
        self.options: dict[str, str] = {}
        self.flags: set[str] = set()  # the SEND_FLAGS given


def parse(args: list[str]) -> PlainSend | None:
    """The plain `inbox send` that `args` is, or None (then the click command runs it)."""
    if "_SXCTL_COMPLETE" in os.environ:  # shell completion is click's
        return None
    plain = PlainSend()
    words: tuple[str, ...] = ("inbox", "send")  # the words still to come
    texts = 0
    i = 0
    while i < len(args):
        arg = args[i]
        name, equals, attached = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if name in GLOBAL_VALUES or (not words and name in SEND_VALUES):
            if not equals:
                i += 1
                if i == len(args):
                    return None
            value = attached if equals else args[i]
            if value.startswith("-") or not value and name in GLOBAL_VALUES or not _as_click_takes_it(name, value):
                return None
            if name in GLOBAL_VALUES:
                plain.settings[GLOBAL_VALUES[name]] = value
            else:
                plain.options[name] = value  # given twice: the last one counts, as in click
        elif arg in GLOBAL_FLAGS:
            plain.settings[GLOBAL_FLAGS[arg]] = True
        elif not words and arg in SEND_FLAGS:
            plain.flags.add(arg)
        elif arg.startswith("-"):
            return None
        elif words:
            if arg != words[0]:
                return None
            words = words[1:]
        else:
            texts += 1
            plain.text = arg
        i += 1
    return plain if not words and texts == 1 else None


def _as_click_takes_it(name: str, value: str) -> bool:
    """Whether click would take `value` of option `name` as it is (a `--mode` it knows, a
    `--priority` of one digit): anything else is click's to convert or refuse."""
    if name == "--mode":
        from ..api.inbox import MODES  # parsing every command line loads nothing more

        return value in MODES
    if name == "--priority":
        return len(value) == 1 and value in "0123456789"
    return True


def run(plain: PlainSend) -> int:
    """Send it, as `sxctl inbox send` does, and print its line or its JSON document."""
    from ..api.inbox import send_message
    from .render import StderrReporter
    from .settings import Settings

    s = Settings(**plain.settings)
    given = plain.options
    priority = int(given["--priority"]) if "--priority" in given else None
    result = send_message(plain.text, mode=given.get("--mode"), priority=priority, stem=given.get("--stem"),
                          key=given.get("--key"), soft_wait="--no-wait" not in plain.flags,
                          follow="--follow" in plain.flags, session=s.session, project=s.project, clock=s.clock,
                          report=StderrReporter(s))
    return print_sent(result, s.json)  # type: ignore[arg-type]  # no --when-below on this path: a SendResult


def print_sent(result: SendResult, as_json: bool) -> int:
    """A send's line or JSON document (both ways in print it here). Stdout that cannot take it
    (`> /dev/full`) is exit 8, and stderr says the message was sent all the same: a script must
    not send it again."""
    import sys

    from ..errors import ExitStatus
    from .render import drop_stream, emit_json, say

    try:
        if as_json:
            emit_json(result.to_json())
        else:
            say(sent_line(result))
    except BrokenPipeError:
        raise
    except OSError as error:
        drop_stream(sys.stdout)
        say(f"sxctl: cannot write standard output ({error.strerror}); the message was sent: {result.stem} is "
            f"{result.state} in {result.inbox.path}", err=True)
        return ExitStatus.OS_REFUSED
    return ExitStatus.OK


def sent_line(result: SendResult) -> str:
    """The human line of a send: where the message went and whether it was consumed."""
    status = "consumed" if result.consumed else "written, not yet consumed"
    if result.state == "retracted":
        status = "already retracted"
    elif result.state == "expired":
        status = "expired unread: it was withdrawn"
    tag = " (duplicate of an earlier send with this key)" if result.duplicate else ""
    if result.forwarded_from is not None:
        tag += f" (forwarded from {result.forwarded_from['session']})"
    return f"sent {result.stem} to {result.session.id} ({result.mode}){tag}: {status}"
