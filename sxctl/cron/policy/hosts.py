"""Host pinning for shared workspaces (`--host NAME|any`): which host this pass runs on, and the
one rule for a host name that may reach a file name (`.scheduler/sxctl-tick/<host>.json`).

The host is `SXCTL_HOST` when set (checked: a bad value is exit 2), else the system's host name
(`socket.gethostname()`), made safe for a file name. A job pinned to a host is run only by a
pass on that host; the store lock and the claims keep every run at most once either way."""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping

from ...errors import UsageError

HOST_ENV = "SXCTL_HOST"
MAX_HOST_LEN = 253  # a DNS name's longest
ANY = "any"
_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def host_rule(name: str) -> str | None:
    """Why `name` is not a host name sxctl uses (None when it is): 1-253 characters, letters,
    digits, `.`, `-`, `_`, starting with a letter or digit, no `..` (so never a path, a dot
    file, a control character or a separator), and not `any`."""
    if not 1 <= len(name) <= MAX_HOST_LEN:
        return f"a host name is 1-{MAX_HOST_LEN} characters"
    if not _SAFE.fullmatch(name) or ".." in name:
        return "a host name has only letters, digits, '.', '-' and '_', starts with a letter or digit and has no '..'"
    if name.lower() == ANY:
        return "'any' is not a host name (it is the default: no pin)"
    return None


def check_host_name(name: str, what: str = "--host") -> str:
    """`name` when host_rule accepts it, else exit 2 naming the value."""
    why = host_rule(name)
    if why is not None:
        raise UsageError(f"invalid {what} {name!r}: {why}")
    return name


def safe_host_name(name: str) -> str:
    """A system host name as a valid host name: other characters become `_`, cut to the length."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", name).replace("..", "__").lstrip("._-")[:MAX_HOST_LEN]
    return cleaned if cleaned and host_rule(cleaned) is None else "localhost"


def this_host(environ: Mapping[str, str]) -> str:
    """The host a pass runs on: SXCTL_HOST (checked), else the system's host name made safe."""
    given = environ.get(HOST_ENV)
    if given:
        return check_host_name(given, HOST_ENV)
    return safe_host_name(socket.gethostname())


def pinned_elsewhere(pinned: str | None, host: str) -> str | None:
    """The host a job is pinned to (`Job.host`) when it is not `host` (the pass leaves the job alone)."""
    return pinned if pinned is not None and pinned != host else None
