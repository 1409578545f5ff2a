"""`sxctl doctor` as a use case: one verdict per check of the project, the agent, permissions,
temps and locks, the scheduler's heartbeat and installed entry, overdue and unknown runs
(sxctl.health), each failing one with its fix."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .. import engines
from ..clock import SYSTEM_CLOCK, Clock
from ..errors import ErrorCode, NotFoundError, SxctlError
from ..health import diagnose
from ..record import record
from ..report import Reporter
from .jobs import ledger_ceiling
from .scope import find_project, find_session, find_workspace


@record
class DoctorReport:
    """`doctor`: one verdict per check (`ok`, `warn`, `fail`), each failing one with its fix."""

    checks: list[dict[str, Any]]
    #: `--strict`: a warning fails too (a read deadline missed, no live agent, …)
    strict: bool = False

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [c for c in self.checks if c["status"] == "fail" or (self.strict and c["status"] == "warn")]

    def to_json(self) -> dict[str, Any]:
        return {"ok": not self.failed, "strict": self.strict, "checks": self.checks,
                "counts": {s: sum(1 for c in self.checks if c["status"] == s) for s in ("ok", "warn", "fail")}}

    def raise_if_failed(self) -> None:
        """DoctorFailed (exit 9) naming the failing checks."""
        if self.failed:
            names = list(dict.fromkeys(c["check"] for c in self.failed))  # a check may fail on several lines
            what = "failed or warned (--strict)" if self.strict else "failed"
            raise SxctlError(f"{len(names)} check(s) {what}: {', '.join(names)}", code=ErrorCode.DOCTOR_FAILED,
                             details=self.to_json())


def doctor(*, session=None, project=None, workspace=None, max_log_bytes: int | None = None,
           crontab_file: str | os.PathLike | None = None, environ: Mapping[str, str] = os.environ,
           clock: Clock = SYSTEM_CLOCK, strict: bool = False) -> DoctorReport:
    """Check the project, the agent, permissions, temps and locks, the scheduler's heartbeat and
    installed entry, overdue and unknown runs, the ledger's size and a comis daemon (read-only).
    `strict`: a warning counts as a failure (`raise_if_failed`)."""
    root = chosen = ws = None
    try:
        root = find_project(project, session=session)
    except NotFoundError:
        pass
    if root is not None:
        try:
            chosen = find_session(session, project=root, clock=clock, report=Reporter())
        except (SxctlError, OSError):  # no session, or none readable: the `sessions` check says which
            chosen = None
    try:
        ws = find_workspace(workspace, project=project, session=session)
    except NotFoundError:
        ws = None

    @functools.cache  # `crontab -l` once per doctor run, however many checks read it
    def crontab_read() -> tuple[str | None, SxctlError | None]:
        try:
            return engines.Crontab(Path(crontab_file) if crontab_file is not None else None).read(), None
        except NotFoundError:  # no crontab(1) here: nothing installed to check
            return None, None
        except SxctlError as error:  # refused (too big, too slow, failed): the `crontab entry` check says so
            return None, error

    def crontab_text() -> str | None:
        text, error = crontab_read()
        if error is not None:
            raise error
        return text

    return DoctorReport(diagnose(root, chosen, ws, environ=environ, clock=clock,
                                 max_log_bytes=ledger_ceiling(max_log_bytes, environ), crontab_text=crontab_text,
                                 crontab_file=os.fspath(crontab_file) if crontab_file is not None else None),
                        strict)
