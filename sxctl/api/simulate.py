"""`cron simulate` as a use case: rehearse the scheduler over a span of time, on a copy of the
store, the policy file, the ledger and the sessions (sxctl.cron.run.rehearsal); nothing is written
in the project."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..clock import SYSTEM_CLOCK, Clock
from ..cron.policy.file import read_policy
from ..cron.policy.job import jobs_of
from ..cron.run.rehearsal import MAX_PASSES, Rehearsal, passes_needed, rehearse
from ..cron.store.file import read_store
from ..errors import SxctlError, UsageError
from ..fsio import read_data_file
from ..jsondata import strict_loads
from ..project.usage import FIGURES, read_usage
from ..record import record
from ..timeparse import display_zone, displayed_in, format_duration_ms, format_ms, parse_local_time_ms, zone_label
from .scope import find_workspace, target_project

if TYPE_CHECKING:
    from ..cron.store.workspace import Workspace


@record
class Simulation:
    """`cron simulate`: each occurrence's fate in each simulated pass, and what the agent was told."""

    workspace: Workspace
    zone: Any
    rehearsal: Rehearsal
    warnings: list[str]

    def to_json(self) -> dict[str, Any]:
        r = self.rehearsal
        return {"ok": True, "workspace": str(self.workspace.root), "from_ms": r.from_ms, "until_ms": r.until_ms,
                "display_tz": zone_label(self.zone),
                "pass_every_ms": r.pass_every_ms, "agent_down": [{"from_ms": a, "to_ms": b} for a, b in r.agent_down],
                "machine_down": [{"from_ms": a, "to_ms": b} for a, b in r.machine_down],
                "passes": r.passes, "truncated": r.truncated, "stopped_at_ms": r.stopped_at_ms,
                "events": r.events, "pings": r.pings, "warnings": self.warnings}


def _time(flag: str, value: str, tz: str | None) -> int:
    try:
        return parse_local_time_ms(value, tz)
    except UsageError as error:  # its hint too: a word (`tomorrow`) or a bare date names the form to use
        raise UsageError(f"invalid {flag} {value!r}: {error.message}", **error.extra) from None


USAGE_FILE_CAP = 1024 * 1024


def _usage_steps(path: str | os.PathLike, tz: str | None) -> list[tuple[int, Any]]:
    """`--usage FILE`: one usage block (an object the simulated agent reports throughout), or a
    list of `{"from": TIME, "usage": {...}}` (each from its time on). The blocks are written as
    they are into the simulated stats.json, so a hostile one is rehearsed as the pass would meet it."""
    try:
        raw = read_data_file(Path(path), USAGE_FILE_CAP)
    except SxctlError as error:
        raise UsageError(f"invalid --usage {os.fspath(path)!r}: {error.message}") from None
    if raw is None:
        raise UsageError(f"invalid --usage {os.fspath(path)!r}: no such file")
    if len(raw) > USAGE_FILE_CAP:
        raise UsageError(f"invalid --usage {os.fspath(path)!r}: larger than {USAGE_FILE_CAP} bytes")
    try:
        doc = strict_loads(raw)
    except ValueError as error:
        raise UsageError(f"invalid --usage {os.fspath(path)!r}: {error}") from None
    if isinstance(doc, dict):
        return [(0, doc)]
    if not isinstance(doc, list) or not doc or not all(isinstance(step, dict) and set(step) == {"from", "usage"}
                                                       and isinstance(step["from"], str) for step in doc):
        raise UsageError(f"invalid --usage {os.fspath(path)!r}: a usage object, or a list of "
                         '{"from": TIME, "usage": {...}}')
    steps = sorted(((_time("--usage from", step["from"], tz), step["usage"]) for step in doc), key=lambda step: step[0])
    if len({at for at, _ in steps}) != len(steps):
        raise UsageError(f"invalid --usage {os.fspath(path)!r}: two steps start at the same time")
    return steps


def _span(flag: str, value: str, tz: str | None) -> tuple[int, int]:
    """`FROM..TO` (the value of `flag`: --agent-down, --machine-down) -> [from, to) in epoch ms."""
    ends = value.split("..")
    if len(ends) != 2 or not all(end.strip() for end in ends):
        raise UsageError(f"invalid {flag} {value!r}: FROM..TO, e.g. 2026-12-01T10:00Z..2026-12-01T14:00Z")
    start, end = (_time(flag, part.strip(), tz) for part in ends)
    if end <= start:
        raise UsageError(f"invalid {flag} {value!r}: it ends before it starts")
    return start, end


def simulate_schedule(*, from_time: str, until: str, agent_down: Sequence[str] = (), pass_every: float = 60.0,
                      tz: str | None = None, max_per_pass: int = 3, max_catchup: int | None = None,
                      workspace=None, project=None,
                      session: str | None = None, environ: Mapping[str, str] = os.environ,
                      clock: Clock = SYSTEM_CLOCK, usage: str | os.PathLike | None = None,
                      machine_down: Sequence[str] = ()) -> Simulation:
    """Run the real scheduler pass every `pass_every` seconds from `from_time` to `until` (TIMEs, in
    `tz` when they name no zone) over a copy of the workspace, with a simulated agent that reads
    every message at once, except during the `agent_down` spans (`FROM..TO`), in the project and in
    every project below the workspace that a job targets. No pass and no agent runs during the
    `machine_down` spans (`FROM..TO`: the machine is off); the first pass after one catches up as a
    real one would. Writes nothing in the project; no delivery command and no wake gate runs.
    `max_catchup` is the passes' `--max-catchup` (None: the workspace's default, 0: no budget).
    `usage` (a JSON file): the usage block the simulated agent reports, to rehearse the spend guards
    (`_usage_steps`)."""
    start, end = _time("--from", from_time, tz), _time("--until", until, tz)
    if end < start:
        raise UsageError(f"--until {until!r} is before --from {from_time!r}")
    if pass_every < 1:
        raise UsageError(f"--pass-every {pass_every:g}s is shorter than one second")
    spans = [_span("--agent-down", value, tz) for value in agent_down]
    off = [_span("--machine-down", value, tz) for value in machine_down]
    steps = _usage_steps(usage, tz) if usage is not None else None
    ws = find_workspace(workspace, project=project, session=session)
    store = read_store(ws)
    if store is None:
        raise UsageError(f"no cron store at {ws.store}: nothing to simulate")
    every_ms = round(pass_every * 1000)
    warnings = []
    needed = passes_needed(start, end, every_ms, off)
    if needed > MAX_PASSES:
        warnings.append(f"the span needs {needed} passes; only the first {MAX_PASSES} run "
                        "(a shorter span or a longer --pass-every covers the rest)")
    ahead = start - clock.now_ms()
    if ahead > 2 * every_ms:  # said, not silent: the first pass meets what is due by then (docs: scheduler guide)
        warnings.append(f"--from is {format_duration_ms(ahead)} after now: the first pass rehearses as if no pass "
                        "ran until then (the store's overdue runs are caught up or skipped there)")
    zone = display_zone(tz)
    with displayed_in(zone):  # the times in the passes' words too
        result = rehearse(ws, target_project(ws, project, session=session), from_ms=start, until_ms=end,
                          pass_every_ms=every_ms, agent_down=spans, environ=environ, max_per_pass=max_per_pass,
                          max_catchup=max_catchup, usage=steps, machine_down=off)
    warnings += _guard_warnings(jobs_of(store, read_policy(ws), ws.root), steps)
    return Simulation(ws, zone, result, warnings)


#: the figures each spend guard reads (cron/spend/guards.py)
GUARD_FIGURES = {"rateLimitCeiling": ("rl_5h", "rl_7d"), "maxSessionTokens": ("total_tokens",),
                 "maxTokensPerDay": ("total_tokens",)}
GUARD_FLAGS = {"rateLimitCeiling": "--rate-limit-ceiling", "maxSessionTokens": "--max-session-tokens",
               "maxTokensPerDay": "--max-tokens-per-day"}


def _guard_warnings(jobs: list[Any], steps: list[tuple[int, Any]] | None) -> list[str]:
    """What the simulated agent's figures leave untested, said, not silent: a guard rehearsed
    with an agent that reports no usage (no --usage: a cap never bites, a ceiling never holds),
    a figure a guard reads that a --usage block lacks or cannot give, a name no agent reports."""
    used: dict[str, list[str]] = {}
    for job in jobs:
        for key in GUARD_FIGURES:
            if job.guards.get(key) is not None:
                used.setdefault(key, []).append(job.name)
    if not used:
        return []

    def names(key: str) -> str:
        found = sorted(used[key])
        return f"{', '.join(found[:3])}{' …' if len(found) > 3 else ''}"

    if steps is None:
        effect = {"rateLimitCeiling": "it never holds a run", "maxSessionTokens": "it never stops a run",
                  "maxTokensPerDay": "its runs add no tokens to the day's count (only tokens counted before can "
                                     "stop one)"}
        return [f"{names(key)}: {GUARD_FLAGS[key]} is rehearsed with an agent that reports no usage: {effect[key]}; "
                f"give --usage with {' and '.join(GUARD_FIGURES[key])}" for key in used]
    warnings = []
    for at, block in steps:
        when = "the --usage block" if at == 0 else f"the --usage step from {format_ms(at, '%Y-%m-%d %H:%M UTC')}"
        figures = read_usage({"usage": block})
        for key in used:
            for figure in GUARD_FIGURES[key]:
                if figure in figures.unreadable:
                    warnings.append(f"{when}: {figure} {figures.unreadable[figure]}: {GUARD_FLAGS[key]} of "
                                    f"{names(key)} finds it unreadable (--on-missing-usage decides)")
        if isinstance(block, dict):
            for name in sorted(set(block) - set(FIGURES)):
                import difflib  # only a name no agent reports pays for it

                close = difflib.get_close_matches(name, FIGURES, n=1, cutoff=0.6)
                warnings.append(f"{when}: {name!r} is no figure an agent reports"
                                + (f" (did you mean {close[0]}?)" if close else ""))
    return list(dict.fromkeys(warnings))
