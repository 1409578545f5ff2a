"""Where the agent's files live (spec sessions.md), in parts: `layout` (the project root and the
paths inside `.scorpiox/`), `sessions` (liveness and which session a command acts on),
`worktrees` (a session's copies in a git worktree) and `cascade` (the configuration the agent
would see). Every name is offered from here: `from sxctl.project import select_session`."""

from __future__ import annotations

from .cascade import BUILT_IN_CONFIG, ConfigValue, parse_env_file, resolve_config
from .layout import SCORPIOX_DIR, ProjectLayout, check_session_id, find_project, is_valid_session_id
from .sessions import (
    LIVE_WINDOW_MS,
    NO_SESSION,
    Liveness,
    Session,
    SessionInfo,
    as_session,
    check_rotation_after_write,
    date_prefix,
    freshest_live,
    last_seen,
    list_sessions,
    live_sessions,
    liveness_of,
    newer_live,
    read_stats,
    resolve_target_session,
    select_session,
    session_info,
    several_live_warning,
    stopped_cleanly,
    warn_if_not_live,
)
from .superseded import follow_or_refuse, warn_if_left_behind
from .worktrees import WorktreeCopies, main_checkout_of, worktree_copies

__all__ = [
    "BUILT_IN_CONFIG", "LIVE_WINDOW_MS", "NO_SESSION", "SCORPIOX_DIR", "ConfigValue", "Liveness", "ProjectLayout",
    "Session", "SessionInfo", "WorktreeCopies", "as_session", "check_rotation_after_write", "check_session_id",
    "date_prefix", "find_project", "follow_or_refuse", "freshest_live", "is_valid_session_id", "last_seen",
    "list_sessions", "live_sessions", "liveness_of", "main_checkout_of", "newer_live", "parse_env_file", "read_stats",
    "resolve_config", "resolve_target_session", "select_session", "session_info", "several_live_warning",
    "stopped_cleanly", "warn_if_left_behind", "warn_if_not_live", "worktree_copies",
]
