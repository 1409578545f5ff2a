"""`cron simulate`: the REAL scheduler pass (runner.SchedulerPass, its admission and fate rules) run
over a copy of the store, the policy file, the ledger and the sessions (the project's and those of
every project in the workspace a job targets), in a temporary folder, with a simulated clock and a
simulated agent that reads every message at once (none while it is down, none while the machine is).
Nothing in the project is written; nothing is delivered, no wake gate runs."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...clock import FakeClock
from ...errors import ErrorCode, InvalidDataError, SxctlError, UsageError
from ...project import ProjectLayout, list_sessions
from ...project.layout import SCORPIOX_DIR
from ...report import Reporter
from ...timeparse import format_ms
from ..spend.file import spend_path
from ..store.file import read_store
from ..store.targets import endpoint_of, holds_project, inside, linked_through, resolve_project, run_target_project
from ..store.workspace import Workspace
from ..timeline.catchup import skipped_count
from .dispatch import Dispatcher, DispatchFailure, Occurrence
from .pings import RecordingPinger
from .tick import PassReport, SchedulerPass, TickOptions

MAX_PASSES = 10_080  # a week of passes a minute apart: the most one rehearsal runs (it says where it stopped)
SIM_MODEL = "sxctl-simulate"
SESSION_FILE_CAP = 16 * 1024 * 1024  # a message with its image is far smaller; transcripts are not copied


@dataclass
class Rehearsal:
    """What `cron simulate` saw: every occurrence's fate in every pass (`events`), the passes run,
    and whether the span was cut at MAX_PASSES (`truncated`, `stopped_at_ms`)."""

    from_ms: int
    until_ms: int
    pass_every_ms: int
    agent_down: list[tuple[int, int]]
    machine_down: list[tuple[int, int]] = field(default_factory=list)  # the machine is off: no pass, no agent
    passes: int = 0
    truncated: bool = False
    stopped_at_ms: int | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    #: the pings the passes would have sent (--ping-url; recorded, never sent: cron/run/pings.py)
    pings: list[dict[str, Any]] = field(default_factory=list)


class SimulatedDispatcher(Dispatcher):
    """Dispatch inside the copy only: inbox messages go to the copied sessions; a delivery is
    accepted without running SXCTL_DELIVER_CMD; a target outside the copy is not reached."""

    def dispatch(self, job: dict[str, Any], occurrence: Occurrence) -> dict[str, Any]:
        if job["payload"]["kind"] == "delivery":
            if not self.environ.get("SXCTL_DELIVER_CMD"):  # the real pass fails it: so does the rehearsal
                failure = DispatchFailure("executor_not_bound", "precondition", "SXCTL_DELIVER_CMD is not set")
                self.reasons[occurrence.execution_id] = str(failure)
                return failure.outcome
            return {"kind": "delivery_only", "delivery": {"status": "accepted", "deliveredChunks": 1,
                                                          "settledAtMs": self.clock.now_ms()}}
        where = run_target_project(job, self.project, workspace=self.workspace)
        if not Path(os.path.realpath(where)).is_relative_to(os.path.realpath(self.workspace.parent)):
            failure = DispatchFailure("executor_precondition", "precondition",
                                      f"its target {where} is outside the project: not rehearsed")
            self.reasons[occurrence.execution_id] = str(failure)
            return failure.outcome
        return super().dispatch(job, occurrence)


def rehearse(ws: Workspace, project: Path, *, from_ms: int, until_ms: int, pass_every_ms: int,
             agent_down: list[tuple[int, int]], environ: Mapping[str, str], max_per_pass: int = 3,
             max_catchup: int | None = None, usage: list[tuple[int, Any]] | None = None,
             machine_down: list[tuple[int, int]] | None = None) -> Rehearsal:
    """Run a pass every `pass_every_ms` from `from_ms` to `until_ms` over a copy of the workspace,
    `project` and the workspace's target projects (`_copy`); none in `machine_down` ([from, to)
    spans: the machine is off, the pass after one sees all that came due meanwhile). The simulated
    agent is live in each copied project except in `agent_down` and `machine_down`, and reports
    `usage` (`(from_ms, block)` steps, the last one begun in force; None: no block)."""
    off = list(machine_down or [])
    result = Rehearsal(from_ms, until_ms, pass_every_ms, agent_down, off)
    with tempfile.TemporaryDirectory(prefix="sxctl-simulate-") as temp:
        copies = {temp: str(ws.root)}  # the copy's folders -> the user's own (`_real_paths`)
        try:  # an error names the user's own file, not the throw-away copy
            sim_ws, sim_project, homes = _copy(ws, project, Path(temp), from_ms, copies)
            held: set[tuple[Any, ...]] = set()
            told: dict[tuple[str, str], dict[str, Any]] = {}  # (session folder, stem) -> the run event that sent it
            sends = _sessions_of(sim_ws, sim_project)
            at = from_ms
            while at <= until_ms:
                back = next((end for start, end in off if start <= at < end), None)
                if back is not None:  # the machine is off: no pass, no agent; the pass grid goes on
                    at += -(-(back - at) // pass_every_ms) * pass_every_ms
                    continue
                if result.passes >= MAX_PASSES:
                    result.truncated, result.stopped_at_ms = True, at
                    break
                up = not any(start <= at < end for start, end in agent_down)
                for home in homes if up else ():
                    _write_stats(home, at, _usage_at(usage, at))
                report = _one_pass(sim_ws, sim_project, at, environ, max_per_pass, max_catchup, result.pings)
                result.passes += 1
                result.events += [_real_paths(event, copies) for event in _events(report, at, held, told, sends)]
                for home in homes if up else ():
                    _read_all(home, at, told)
                at += pass_every_ms
        except SxctlError as error:
            error.message = _real_paths({"m": error.message}, copies)["m"]
            error.file = _real_paths({"f": error.file}, copies)["f"]
            raise
    return result


def passes_needed(from_ms: int, until_ms: int, every_ms: int, machine_down: list[tuple[int, int]]) -> int:
    """How many passes `rehearse` runs uncapped: one every `every_ms` from `from_ms` to
    `until_ms`, less those in a `machine_down` span."""
    grid = (until_ms - from_ms) // every_ms + 1 if until_ms >= from_ms else 0
    merged: list[list[int]] = []
    for start, end in sorted(machine_down):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    for start, end in merged:  # the grid's steps k with start <= from + k * every < end
        first, stop = (min(grid, max(0, -(-(edge - from_ms) // every_ms))) for edge in (start, end))
        grid -= stop - first
    return grid


def _copy(ws: Workspace, project: Path, temp: Path, from_ms: int,
          copies: dict[str, str]) -> tuple[Workspace, Path, list[Path]]:
    """The workspace's scheduler files and the sessions of `project` and of every project in the
    workspace a job targets (`_targets`), copied below `temp` at the same places relative to the
    workspace (each copied folder -> the user's own, in `copies`); the session of each that the
    simulated agent runs in."""
    root = Path(os.path.realpath(ws.root))
    real_project = Path(os.path.realpath(project))
    sim_ws = Workspace(temp / "project" if real_project == root else temp / "workspace")
    sim_project = sim_ws.root / real_project.relative_to(root) if inside(real_project, root) else temp / "project"
    copies.update({str(sim_project): str(project), str(sim_ws.root): str(ws.root)})
    sim_ws.scheduler.mkdir(parents=True)
    for path in (ws.store, ws.policy, ws.ledger, spend_path(ws.scheduler)):  # + the tokens already attributed
        if os.path.islink(path):  # refused as the pass refuses them, never silently left out
            raise InvalidDataError(str(path), "refusing to use it: it is a symbolic link")
        if os.path.lexists(path) and not path.is_file():
            raise InvalidDataError(str(path), "not a regular file")
        if path.is_file():
            shutil.copy2(path, sim_ws.scheduler / path.name)
    homes = [_home(project, sim_project, from_ms, temp, copies)]
    for target, sim_target in _targets(sim_ws, ws.root, temp, {str(real_project)}, copies):
        homes.append(_home(target, sim_target, from_ms, temp, copies))
    return sim_ws, sim_project, homes


def _targets(sim_ws: Workspace, workspace: Path, temp: Path, seen: set[str],
             copies: dict[str, str]) -> list[tuple[Path | None, Path]]:
    """The projects in `workspace` (itself or below it) that the store's jobs target, stored
    relative to it, each once with its place in the copy: a folder holding a real `.scorpiox/`,
    reached through no symbolic link, has its sessions copied. A link on the way, or a linked
    `.scorpiox`, is never followed: the copy holds a link at its place to a folder of the copy with
    a simulated agent (None: nothing copied), so the pass meets it, and refuses it, as for real.
    An absolute target is not copied (the rehearsal says it is not rehearsed)."""
    found: list[tuple[Path | None, Path]] = []
    for job in (read_store(sim_ws) or {"jobs": []})["jobs"]:
        endpoint = endpoint_of(job)
        if endpoint is None or os.path.isabs(endpoint["channelInstanceId"]):
            continue
        resolved = resolve_project(endpoint["channelInstanceId"], workspace)
        if not inside(resolved, workspace) or str(resolved) in seen:  # a hand-written `..`: not rehearsed
            continue
        seen.add(str(resolved))
        link = linked_through(endpoint["channelInstanceId"], resolved, workspace)
        if link is None and os.path.islink(resolved / SCORPIOX_DIR):
            link = resolved / SCORPIOX_DIR
        if link is not None:
            copied = sim_ws.root / link.relative_to(workspace)
            if not os.path.lexists(copied):
                behind = temp / "linked" / str(len(copies))
                behind.mkdir(parents=True)
                copied.parent.mkdir(parents=True, exist_ok=True)
                os.symlink(behind, copied)
                copies[str(behind)] = str(link)
            found.append((None, sim_ws.root / resolved.relative_to(workspace)))
        elif holds_project(resolved):
            found.append((resolved, sim_ws.root / resolved.relative_to(workspace)))
    return found


def _home(project: Path | None, sim_project: Path, from_ms: int, temp: Path, copies: dict[str, str]) -> Path:
    """`project`'s sessions (None: none) copied into `sim_project` (`_copy_sessions`), none of them
    live; the session the simulated agent runs in."""
    sessions = ProjectLayout(project).sessions if project is not None else None
    target = ProjectLayout(sim_project).sessions
    if sessions is not None and sessions.is_dir() and not sessions.is_symlink():
        _copy_sessions(sessions, target, temp, copies)
    target.mkdir(parents=True, exist_ok=True)
    for folder in target.iterdir():  # only the simulated agent is ever live
        stats = folder / "stats.json"
        if folder.is_dir() and not folder.is_symlink() and stats.is_file() and not stats.is_symlink():
            stats.unlink()
    infos = list_sessions(sim_project)
    session_dir = infos[0].dir if infos else target / f"{format_ms(from_ms, '%Y_%m_%d')}_simulated_agent"
    session_dir.mkdir(exist_ok=True)
    return session_dir


def _copy_sessions(source: Path, target: Path, temp: Path, copies: dict[str, str]) -> None:
    """The session folders as the pass reads them: folders and regular files up to
    `SESSION_FILE_CAP` (messages, keys, stats, timers); never a FIFO, a socket, a device or a
    transcript-sized file. A symbolic link is never followed: the copy holds a link at its place to
    an empty folder of the copy, which the pass refuses as it refuses the real one (an inbox
    linked elsewhere fails its runs in the rehearsal too), and nothing outside is read or written."""
    target.mkdir(parents=True, exist_ok=True)
    for entry in os.scandir(source):
        if entry.is_symlink():
            behind = temp / "linked" / f"session-{len(copies)}"
            behind.mkdir(parents=True)
            os.symlink(behind, target / entry.name)
            copies[str(behind)] = entry.path
            continue
        if entry.is_dir(follow_symlinks=False):
            _copy_sessions(Path(entry.path), target / entry.name, temp, copies)
        elif entry.is_file(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_size <= SESSION_FILE_CAP:
            shutil.copy2(entry.path, target / entry.name, follow_symlinks=False)


def _real_paths(event: dict[str, Any], copies: dict[str, str]) -> dict[str, Any]:
    """The event, its copies' paths rewritten in place as the project's own (a reason names the
    folder the user knows, never the throw-away copy; in place: the agent's read is added later)."""
    for key, value in event.items():
        if isinstance(value, str):
            for copy, original in sorted(copies.items(), key=lambda pair: -len(pair[0])):
                value = value.replace(copy, original)
            event[key] = value
    return event


def _usage_at(steps: list[tuple[int, Any]] | None, at: int) -> Any:
    begun = [block for start, block in steps or [] if start <= at]
    return begun[-1] if begun else None


def _write_stats(session_dir: Path, at: int, usage: Any = None) -> None:
    """The simulated agent's own stats.json, in the copy (a link the copy kept in its place goes:
    it pointed into the copy, and this agent is not the one that made it)."""
    stats: dict[str, Any] = {"updated_ms": at, "model": SIM_MODEL}
    if usage is not None:
        stats["usage"] = usage
    path = session_dir / "stats.json"
    if path.is_symlink():
        path.unlink()
    path.write_text(json.dumps(stats), encoding="utf-8")


def _one_pass(ws: Workspace, project: Path, at: int, environ: Mapping[str, str], max_per_pass: int,
              max_catchup: int | None, pings: list[dict[str, Any]]) -> PassReport:
    clock = FakeClock(at)
    report = Reporter()
    options = TickOptions(project=project, max_per_pass=max_per_pass, max_catchup=max_catchup,
                          terminalize_orphans=True, no_gates=True)
    scheduler = SchedulerPass(ws, options, environ=environ, clock=clock, report=report)
    scheduler.pinger = RecordingPinger(clock.now_ms, pings)  # a rehearsal sends no ping: it records them
    scheduler.dispatcher = SimulatedDispatcher(options.project, options.to, ws.root, options.turn_mode,
                                               options.deliver_timeout, True, environ, clock, report)
    try:
        return scheduler.run()
    except SxctlError as error:
        if error.code == ErrorCode.CLOCK_BEHIND:
            raise UsageError(f"--from {format_ms(at, '%Y-%m-%d %H:%M UTC')} is before a run the ledger "
                             "records: rehearse from later") from None
        raise


def _sessions_of(sim_ws: Workspace, sim_project: Path) -> dict[str, Path]:
    """Each job's sessions folder in the copy (job id -> folder), where its messages are read."""
    jobs = (read_store(sim_ws) or {"jobs": []})["jobs"]
    return {job["id"]: ProjectLayout(run_target_project(job, sim_project, workspace=sim_ws.root)).sessions
            for job in jobs}


def _events(report: PassReport, at: int, held: set[tuple[Any, ...]], told: dict[tuple[str, str], dict[str, Any]],
            sends: dict[str, Path]) -> list[dict[str, Any]]:
    """Each occurrence's fate in one pass: one event per occurrence (or per run of skipped ones)."""
    events: list[dict[str, Any]] = []

    def event(name: str, fate: str, occurrence: int | None, **extra: Any) -> dict[str, Any]:
        row = {"pass_ms": at, "job": name, "fate": fate, "occurrence_ms": occurrence, "count": 1,
               "reason": None, "told": None, **extra}
        events.append(row)
        return row

    for skip in report.admission.skipped:
        event(skip["name"], "skipped", skip["firstMs"], count=skip["count"], reason=skip["reason"],
              last_ms=skip["lastMs"])
    for wait in report.admission.waiting:
        if (wait["jobId"], wait["dueSinceMs"]) not in held:
            held.add((wait["jobId"], wait["dueSinceMs"]))
            event(wait["name"], "held", wait["dueSinceMs"], reason=wait["reason"], until_ms=wait["giveUpAtMs"],
                  **({"detail": wait["detail"]} if "detail" in wait else {}))  # a spend guard says why
    for paused in report.admission.paused:
        event(paused["name"], "paused", None, reason=paused["reason"], detail=paused["message"])
    given_up = {row["jobId"] for row in report.admission.given_up}
    for run in report.runs:
        stands_for = 1 + skipped_count(run)
        fate = ("given_up" if run["jobId"] in given_up else "failed" if run.get("reason")
                else "catch_up" if run["trigger"] == "catchup" else "dispatched")
        row = event(run["name"], fate, run["scheduledForMs"], count=stands_for, reason=run.get("reason"))
        outcome = run.get("outcome") or {}
        if outcome.get("stem") and run["jobId"] in sends:  # stems are unique in a session, not across projects
            told[(os.path.normpath(sends[run["jobId"]] / outcome["sessionId"]), outcome["stem"])] = row
    for deferred in report.deferred:
        event(deferred["name"], "deferred", deferred["nextRunAtMs"],
              reason="--max-catchup" if deferred.get("reason") == "max_catchup" else "--max-per-pass")
    for pinned in report.elsewhere:  # told once per occurrence, as a held one
        if (pinned["jobId"], pinned["nextRunAtMs"], "host") not in held:
            held.add((pinned["jobId"], pinned["nextRunAtMs"], "host"))
            event(pinned["name"], "elsewhere", pinned["nextRunAtMs"],
                  reason=f"pinned to host {pinned['host']}, not {report.host}")
    return events


def _read_all(session_dir: Path, at: int, told: dict[tuple[str, str], dict[str, Any]]) -> None:
    """The simulated agent reads every pending message at once: moved to done/, its text kept
    on the run event that sent it."""
    inbox = session_dir / "inbox"
    if not inbox.is_dir():
        return
    (inbox / "done").mkdir(exist_ok=True)
    for name in sorted(os.listdir(inbox)):
        if not name.endswith(".json"):
            continue
        stem = name[:-len(".json")]
        try:
            text = json.loads((inbox / name).read_text(encoding="utf-8")).get("text")
        except (OSError, ValueError):
            text = None
        os.rename(inbox / name, inbox / "done" / name)
        if (os.path.normpath(session_dir), stem) in told:
            told[(os.path.normpath(session_dir), stem)].update(told=text, read_ms=at)
