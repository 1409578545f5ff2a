"""`cron handoff`: the workspace over to a comis daemon, saying what comis will do differently. A
daemon runs every job by comis's store alone, so the jobs sxctl's policy file holds back (a
maintenance window, a host pin, a spend guard, a lifetime, …: cron/policy/comis_gap.py) would
run where sxctl held them. The hand-off lists each such job and refuses (exit 4 `policy_loss`,
nothing changed) unless told to accept that, or to pause those jobs in the store first."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...clock import SYSTEM_CLOCK, Clock
from ...errors import ConflictError, ErrorCode, UsageError
from ...locks import MkdirLock
from ...report import Reporter
from ..policy.comis_gap import policy_losses, workspace_notes
from ..policy.file import read_policy
from .authoring import set_job_paused
from .file import LOCK_WAIT_S, hand_off, refuse_if_daemon_owns, write_store
from .workspace import Workspace


@dataclass
class HandedOff:
    """What a hand-off did: where the ledger went (None: there was none), each job comis runs
    differently (`losses`, `policy_losses` rows), the jobs it paused, and the notes."""

    moved_to: Path | None = None
    losses: list[dict[str, Any]] = field(default_factory=list)
    paused: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def losses_text(losses: list[dict[str, Any]]) -> str:
    """`all 3: … (comis …); nightly: --host build-1 (comis runs it on …), …; poll: …` — one
    line for all, a setting every job has (the workspace's window or budget) said once."""
    def said(setting: dict[str, str]) -> str:
        return f"{setting['setting']} (comis {setting['comis']})"

    shared = [s for s in losses[0]["settings"] if len(losses) > 1 and all(s in row["settings"] for row in losses)]
    parts = [f"all {len(losses)}: {', '.join(said(s) for s in shared)}"] if shared else []
    parts += [f"{row['name']}: {', '.join(said(s) for s in row['settings'] if s not in shared)}" for row in losses
              if any(s not in shared for s in row["settings"])]
    return "; ".join(parts)


def hand_off_workspace(ws: Workspace, *, accept_policy_loss: bool = False, pause_affected: bool = False,
                       clock: Clock = SYSTEM_CLOCK, lock_wait_s: float = LOCK_WAIT_S,
                       environ: Mapping[str, str] = os.environ, report: Reporter | None = None) -> HandedOff:
    """Move the ledger aside for a comis daemon (file.hand_off) once every job comis would run
    differently is accepted (`accept_policy_loss`) or paused in the store, comis's own pause,
    under the same lock (`pause_affected`; refused while a daemon owns the workspace: it would
    not see the change); else exit 4 `policy_loss` naming each, and nothing changes. An invalid
    policy file stops it (exit 5): what it holds cannot be told."""
    if accept_policy_loss and pause_affected:
        raise UsageError("--accept-policy-loss and --pause-affected cannot be combined: accept the loss, or pause "
                         "those jobs")
    done = HandedOff()

    def check(store: dict[str, Any], lock: MkdirLock) -> None:
        policy = read_policy(ws)
        done.notes = workspace_notes(policy) if store["jobs"] else []
        done.losses = policy_losses(store, policy, ws.root, clock.now_ms())
        if not done.losses or accept_policy_loss:
            return
        if not pause_affected:
            raise ConflictError(
                f"a comis daemon ignores sxctl's policy file, and {len(done.losses)} job(s) would run differently — "
                f"{losses_text(done.losses)}; nothing was changed: hand off with --accept-policy-loss to let comis "
                "run them so, or --pause-affected to pause them in the store first",
                code=ErrorCode.POLICY_LOSS, file=ws.policy, details={"policy_loss": done.losses})
        refuse_if_daemon_owns(ws, environ, report or Reporter())
        for row in done.losses:
            set_job_paused(store, row["name"], True)
        write_store(ws, store, lock)
        done.paused = [row["name"] for row in done.losses]

    done.moved_to = hand_off(ws, clock=clock, lock_wait_s=lock_wait_s, before=check)
    return done
