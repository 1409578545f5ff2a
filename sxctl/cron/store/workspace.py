"""A comis agent workspace and where its files are: the plain value the store, the policy file,
the ledger and the views all take (cron-store.md §1)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from ...errors import ErrorCode, NotFoundError, SxctlError, UsageError
from ...fsio import refuse_symlinks_below


@dataclass(frozen=True)
class Workspace:
    """A comis agent workspace: the folder that holds `.scheduler/` (its paths made once: a
    rehearsal's passes ask for them tens of thousands of times)."""

    root: Path

    @cached_property
    def scheduler(self) -> Path:
        return self.root / ".scheduler"

    @cached_property
    def store(self) -> Path:
        return self.scheduler / "cron-jobs.json"

    @cached_property
    def store_sentinel(self) -> Path:
        return self.scheduler / "cron-jobs.lock"

    @cached_property
    def ledger(self) -> Path:
        return self.scheduler / "cron-executions.jsonl"

    @cached_property
    def ledger_sentinel(self) -> Path:
        return self.scheduler / "cron-executions.lock"

    @cached_property
    def policy(self) -> Path:
        """sxctl's per-job settings beside the comis store (cron/policy/file.py)."""
        return self.scheduler / "sxctl-policy.json"

    @cached_property
    def handed_off(self) -> Path:
        """The mark `cron handoff` leaves (cron/store/handoff.py): sxctl's passes stay out."""
        return self.scheduler / "sxctl-handed-off.json"

    @cached_property
    def reset_intent(self) -> Path:
        return self.scheduler / "cron-reset-intent.json"

    def refuse_symlinks(self) -> None:
        """Before any write: `.scheduler/`, its sentinels, owner notes, store and ledger must be
        real (exit 5 naming the link), or the store would be created wherever a link points."""
        refuse_symlinks_below(self.root, self.scheduler)
        for path in (self.store, self.ledger, self.policy, self.store_sentinel, self.ledger_sentinel,
                     Path(f"{self.store_sentinel}.owner"), Path(f"{self.ledger_sentinel}.owner")):
            if os.path.islink(path):
                raise SxctlError(f"refusing to use {path}: it is a symbolic link",
                    code=ErrorCode.INVALID_DATA, file=path)


def locate_workspace(explicit: str | None, environ: Mapping[str, str], project_finder: Callable[[], Path]) -> Workspace:
    """`--workspace`, then `SXCTL_WORKSPACE`, then the project root (cron-store.md §1). An empty
    `--workspace ""` (an unset variable in a script) is refused, never taken for "not given"."""
    if explicit == "":
        raise UsageError("--workspace is empty: give the folder holding .scheduler/")
    given = explicit or environ.get("SXCTL_WORKSPACE")
    if given:
        root = Path(os.path.realpath(given))
        if not root.is_dir():
            raise NotFoundError(f"workspace {root} is not a folder", code=ErrorCode.FILE_NOT_FOUND, file=root)
        return Workspace(root)
    return Workspace(project_finder())
