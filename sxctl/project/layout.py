"""Where a project keeps the agent's files, and which folder is the project (sessions.md §2, §4):
the one place that spells `.scorpiox/` and the names inside it."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from ..errors import ErrorCode, NotFoundError, UsageError

#: the folder that makes a folder a project
SCORPIOX_DIR = ".scorpiox"
_SESSION_ID = re.compile(r"[A-Za-z0-9_.-]{1,128}")


class ProjectLayout:
    """The agent's files under one project root: `layout.sessions`, `layout.session(id)`, … —
    so that no module spells a path inside `.scorpiox/` on its own."""

    __slots__ = ("root",)

    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def scorpiox(self) -> Path:
        return self.root / SCORPIOX_DIR

    @property
    def sessions(self) -> Path:
        return self.scorpiox / "sessions"

    def session(self, session_id: str) -> Path:
        return self.sessions / session_id

    @property
    def config_file(self) -> Path:
        """The project tier of the configuration cascade (sessions.md §8)."""
        return self.scorpiox / "scorpiox-env.txt"

    @property
    def profiles(self) -> Path:
        """The folder of the project's `<ACTIVE_PROFILE>.txt` files."""
        return self.scorpiox / "scorpiox-env"

    def exists(self) -> bool:
        """Whether the root is a project (holds a `.scorpiox/` folder)."""
        return self.scorpiox.is_dir()

    @staticmethod
    def of_session_dir(session_dir: Path) -> ProjectLayout | None:
        """The project a session folder lies in (the folder above its `.scorpiox/`), or None."""
        for parent in session_dir.parents:
            if parent.name == SCORPIOX_DIR:
                return ProjectLayout(parent.parent)
        return None

    @staticmethod
    def is_session_dir(folder: Path) -> bool:
        """Whether `folder` is named as a folder of `<project>/.scorpiox/sessions/`."""
        return folder.parent.name == "sessions" and folder.parent.parent.name == SCORPIOX_DIR


def is_valid_session_id(session_id: str) -> bool:
    return bool(_SESSION_ID.fullmatch(session_id)) and ".." not in session_id and session_id != "."


def check_session_id(session_id: str) -> str:
    """A session id a user gave us: exit 2 unless it is a plain folder name (sessions.md §4)."""
    if not is_valid_session_id(session_id):
        raise UsageError(
            f"invalid session id {session_id!r}: use letters, digits, '_', '.', '-' "
            "(at most 128, no '..')"
        )
    return session_id


def find_project(
    explicit: str | None = None,
    *,
    environ: Mapping[str, str] = os.environ,
    cwd: Path | None = None,
    session_given: bool = False,
) -> Path:
    """The project root (the folder holding `.scorpiox/`), canonical (sessions.md §2). An empty
    `--project ""` (an unset variable in a script) is refused, never taken for "not given"."""
    if explicit == "":
        raise UsageError("--project is empty: give the project folder")
    for given, origin in ((explicit, "--project"), (environ.get("SXCTL_PROJECT") or None, "SXCTL_PROJECT")):
        if given:
            root = Path(os.path.realpath(given))
            if not ProjectLayout(root).exists():
                raise NotFoundError(
                    f"no .scorpiox/ folder in {root} (from {origin})", code=ErrorCode.PROJECT_NOT_FOUND
                )
            return root
    session_dir = environ.get("SX_SESSION_DIR")
    if session_dir and not session_given and not environ.get("SXCTL_SESSION"):
        of_session = ProjectLayout.of_session_dir(Path(os.path.realpath(session_dir)))
        if of_session is not None and of_session.exists():
            return of_session.root
    if cwd is None:
        try:
            here = os.getcwd()
        except FileNotFoundError:
            raise NotFoundError("the working folder no longer exists; cd to the project or pass --project DIR",
                                code=ErrorCode.PROJECT_NOT_FOUND) from None
    else:
        here = os.fspath(cwd)
    start = Path(os.path.realpath(here))
    for folder in (start, *start.parents):
        if ProjectLayout(folder).exists():
            return folder
    raise NotFoundError(
        f"no .scorpiox/ folder found from {start} upward; pass --project DIR",
        code=ErrorCode.PROJECT_NOT_FOUND,
    )
