"""`inbox send --when-below PCT`: deliver when the agent can act ("continue when the usage limit
resets"). Below the ceiling — or with no usage figure to read, as the spend guards run then — the
message is sent now; at or above it, a one-shot cron job guarded by `--rate-limit-ceiling` holds
it until a scheduler pass sees the agent's `rl_5h` and `rl_7d` below the ceiling, then delivers
it once (docs/guides/message-lifetimes.md)."""

from __future__ import annotations

import re
from typing import Any

from ..clock import Clock
from ..errors import UsageError
from ..record import record
from ..report import Reporter

#: how long the held message waits for the usage to drop: past a 7-day window's reset
HOLD_S = 8 * 86_400


def ceiling_of(text: str) -> float:
    """`90%` or `0.9` -> 0.9 (exit 2 unless it is above 0 and at most 100%)."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(%?)\s*", text, re.ASCII)
    value = None if match is None else float(match.group(1)) / (100 if match.group(2) else 1)
    if value is None or not 0 < value <= 1:
        raise UsageError(f"invalid --when-below {text!r}: a share of the rate limit, such as 90% or 0.9")
    return value


@record
class GatedSend:
    """What `inbox send --when-below` did: sent now (`sent`, a SendResult), or held in a cron job
    (`job`, a JobChange) until the agent's usage is below `ceiling`."""

    ceiling: float
    usage: dict[str, Any]
    sent: Any = None
    job: Any = None
    pass_seen: bool = True  # a scheduler pass has run in the job's workspace

    @property
    def held(self) -> bool:
        return self.job is not None

    def to_json(self) -> dict[str, Any]:
        gate = {"held": self.held, "ceiling": self.ceiling, "usage": self.usage}
        if self.sent is not None:
            return {**self.sent.to_json(), **gate}
        return {"ok": True, **gate, "job": self.job.outcome["name"], "jobId": self.job.outcome["jobId"],
                "workspace": str(self.job.workspace.root), "pass_seen": self.pass_seen}


def duration_s(expires: float | str | None) -> float | None:
    """`--expires` with `--when-below`: a DURATION, in seconds (a TIME cannot hold for a run to come)."""
    if not isinstance(expires, str):
        return expires
    from ..timeparse import parse_duration_ms

    return parse_duration_ms(expires, what="--expires (a DURATION with --when-below)") / 1000


def rate_use(session: Any, report: Reporter) -> dict[str, float | None]:
    """The live agent's rate-limit use (`rl_5h`, `rl_7d`; None: unreadable, which the guards run on)."""
    from ..project.usage import RATE_FIGURES, read_usage

    usage = read_usage(session.stats)
    figures = {name: usage.get(name) for name in RATE_FIGURES}
    if all(value is None for value in figures.values()):
        report.note(f"the agent reports no rate-limit use ({'; '.join(usage.unreadable.values()) or 'none'}): "
                    "sent now, as the spend guards run then")
    return figures


def hold_until_below(text: str | None, ceiling: float, figures: dict[str, Any], session: Any, *,
                     expires: float | None, read_within: float | None, clock: Clock,
                     report: Reporter) -> GatedSend:
    """A one-shot job of `session`'s project that a pass delivers once the use is below `ceiling`
    (held up to 8 days); `expires` (a DURATION) and `read_within` give its message a lifetime."""
    from ..cron.run.heartbeat import newest_pass_ms
    from .jobs import add_job, job_spec
    from .scope import find_workspace

    job = add_job(f"when-below-{clock.time_ns() // 1_000_000}", project=session.project, clock=clock, report=report,
                  spec=job_spec(in_="1", payload="agent-turn", text=text, rate_limit_ceiling=ceiling,
                                hold_max=HOLD_S, missed_note=False, expires=expires, read_within=read_within))
    ws = find_workspace(project=session.project)
    seen = newest_pass_ms(ws, clock.now_ms()) is not None
    if not seen:
        report.warn(f"no scheduler pass has run in {ws.root}: nothing delivers the held message until one does "
                    "(`sxctl cron export --target crontab --install`, or `sxctl cron tick` in a loop)")
    return GatedSend(ceiling, figures, job=job, pass_seen=seen)
