"""Whose heartbeat a `stats.json` is: the evidence that overrules "written less than 10 s ago,
so an agent reads this session" (sessions.md §5).

Two facts are sound, and nothing else is taken: the reference agent's `sxctl.pid` names a
process that no longer exists in the process table this sxctl sees (`sxctl.pid_space` says
which table the pid belongs to: a pid of another host or container is never looked up), and
`cwd` names a folder that exists here and is another project whose session folder is not this
one (the session folder was copied, with the agent still writing the original). A `cwd` that
does not exist here (another host's path, a mount at another place) is no evidence."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .layout import ProjectLayout

_PID_SPACE: list[str] = []  # computed once per process


def pid_space() -> str:
    """Which process table a pid of this process belongs to: on Linux the boot and the pid
    namespace (two containers on one kernel differ), elsewhere the host name."""
    if not _PID_SPACE:
        try:
            with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
                boot = handle.read().strip()
            space = f"linux:{boot}:{os.readlink('/proc/self/ns/pid')}"
        except OSError:
            import socket  # only where /proc does not say

            space = f"host:{socket.gethostname()}"
        _PID_SPACE.append(space)
    return _PID_SPACE[0]


def not_an_agent_here(stats: dict[str, Any], session_dir: Path | None) -> str | None:
    """Why the agent that wrote this recent `stats.json` (of `session_dir`) does not read this
    session (its process is gone, or it works in another project), or None when nothing says so."""
    return _process_gone(stats) or (_other_project(stats, session_dir) if session_dir is not None else None)


def _process_gone(stats: dict[str, Any]) -> str | None:
    block = stats.get("sxctl")
    if not isinstance(block, dict) or block.get("pid_space") != pid_space():
        return None
    pid = block.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return None
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return f"its agent (pid {pid}) is gone"
    except (OSError, OverflowError):  # it exists (another user's), the system would not say, or no pid is that big
        return None
    return None


def _other_project(stats: dict[str, Any], session_dir: Path) -> str | None:
    """A `cwd` no path can be (a NUL, too long, unreadable on the way) is no evidence either."""
    layout = ProjectLayout.of_session_dir(session_dir)
    cwd = stats.get("cwd")
    if layout is None or not isinstance(cwd, str) or not os.path.isabs(cwd) or cwd == str(layout.root):
        return None
    try:
        real = Path(os.path.realpath(cwd))
        own = Path(os.path.realpath(layout.root))
        if not real.is_dir() or real == own or own in real.parents:
            return None
        if os.path.samefile(real, own):  # another way to the same folder (a bind mount)
            return None
        theirs = ProjectLayout(real).session(session_dir.name)
        if theirs.is_dir() and os.path.samefile(theirs, session_dir):  # its own folder, reached through a link
            return None
    except (OSError, ValueError):
        return None
    from .worktrees import main_checkout_of  # only a cwd elsewhere pays for it

    if main_checkout_of(real, ask_git=False) == own:  # the main checkout's mirror of a worktree's session
        return None
    return f"it was written by an agent working in {cwd}"
