"""Which copy of a session folder is which when the project is a git worktree (sessions.md §7):
the agent runs in the worktree, and the main checkout may hold a mirror of its session."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from ..record import record
from .layout import ProjectLayout


@record
class WorktreeCopies:
    """The copies of one session folder in a git worktree project: the worktree's own (where the
    agent runs) and the main checkout's mirror (`role` says which one was asked about)."""

    role: str  # worktree | mirror | none
    worktree_dir: Path | None
    mirror_dir: Path | None

    def to_json(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "worktree_dir": str(self.worktree_dir) if self.worktree_dir else None,
            "mirror_dir": str(self.mirror_dir) if self.mirror_dir else None,
        }

    def labelled(self, selected: Path) -> list[tuple[str, Path]]:
        """(copy label, folder) pairs, the worktree copy first; `none` outside worktrees."""
        if self.role == "none":
            return [("none", selected)]
        pairs = [("worktree", self.worktree_dir), ("mirror", self.mirror_dir)]
        return [(label, folder) for label, folder in pairs if folder is not None]

    def primary(self, selected: Path) -> Path:
        """The copy the agent runs from: writes go here."""
        return self.worktree_dir if self.role != "none" and self.worktree_dir else selected


def _read_gitdir_file(dot_git: Path) -> Path | None:
    try:
        text = dot_git.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    for line in text.splitlines():
        if line.startswith("gitdir:"):
            gitdir = Path(line[len("gitdir:"):].strip())
            return gitdir if gitdir.is_absolute() else (dot_git.parent / gitdir)
    return None


def main_checkout_of(project: Path, *, ask_git: bool = True) -> Path | None:
    """The main checkout when `project` is a linked git worktree, else None (sessions.md §7 rules 1–3).
    `ask_git=False` reads files only: a folder a `stats.json` names is never one git runs in."""
    dot_git = project / ".git"
    if dot_git.is_dir() or not dot_git.exists():
        return None
    common: Path | None = None
    gitdir = _read_gitdir_file(dot_git)
    if gitdir is not None:
        try:
            rel = (gitdir / "commondir").read_text(encoding="utf-8").strip()
            common = Path(os.path.realpath(gitdir / rel))
        except OSError:
            common = None
    if common is None and ask_git:
        common = _git_common_dir(project)
    if common is None or common.name != ".git":
        return None
    return common.parent


def _git_common_dir(project: Path) -> Path | None:
    import shutil  # here, not at the top: only a worktree whose .git file cannot be read asks git
    import subprocess

    git = shutil.which("git")
    if git is None:
        return None
    try:
        out = subprocess.run(
            [git, "-C", str(project), "rev-parse", "--path-format=absolute", "--git-common-dir"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return Path(os.path.realpath(out)) if out else None


def _linked_worktrees(main: Path) -> list[Path]:
    """Worktree roots registered in the main checkout (`.git/worktrees/*/gitdir`), read as
    files rather than by running `git worktree list`."""
    admin = main / ".git" / "worktrees"
    roots: list[Path] = []
    try:
        entries = list(os.scandir(admin))
    except OSError:
        return roots
    for entry in entries:
        try:
            target = Path((Path(entry.path) / "gitdir").read_text(encoding="utf-8").strip())
        except OSError:
            continue
        roots.append(target.parent)
    return roots


def worktree_copies(
    project: Path, session_id: str, selected: Path, stats: dict[str, Any] | None
) -> WorktreeCopies:
    """Which copy `selected` is, and where its twin lives."""
    main, linked = _checkout_facts(project)
    if main is not None:
        mirror = ProjectLayout(main).session(session_id)
        return WorktreeCopies("worktree", selected, mirror if mirror.is_dir() else None)
    candidates: list[Path] = []
    cwd = stats.get("cwd") if stats else None
    if isinstance(cwd, str) and os.path.isabs(cwd) and cwd != str(project):
        start = Path(cwd)
        try:
            for folder in (start, *start.parents):
                if ProjectLayout(folder).exists():
                    candidates.append(folder)
                    break
        except (OSError, ValueError):  # a cwd no path can be (too long, a NUL) names no copy
            pass
    candidates.extend(linked)
    for root in candidates:
        if root == project:
            continue
        root = Path(os.path.realpath(root))
        if root == project or _checkout_facts(root)[0] is None:
            continue
        twin = ProjectLayout(root).session(session_id)
        if twin.is_dir():
            return WorktreeCopies("mirror", twin, selected)
    return WorktreeCopies("none", None, None)


_CHECKOUTS: dict[Path, tuple[float, Path | None, list[Path]]] = {}
_CHECKOUT_TTL_S = 1.0


def _checkout_facts(project: Path) -> tuple[Path | None, list[Path]]:
    """(its main checkout when `project` is a linked worktree, the worktrees linked to it when it
    is a main checkout): the same for every session of a listing, looked up once a second."""
    cached = _CHECKOUTS.get(project)
    if cached is not None and time.monotonic() - cached[0] < _CHECKOUT_TTL_S:
        return cached[1], cached[2]
    main = main_checkout_of(project)
    linked = _linked_worktrees(project) if main is None and (project / ".git").is_dir() else []
    _CHECKOUTS[project] = (time.monotonic(), main, linked)
    return main, linked
