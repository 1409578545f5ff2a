"""What one scheduler pass did (`cron tick`, `cron run`), told once per occurrence.

Every occurrence a pass deals with gets one outcome — ran (alone or folded into a catch-up run),
failed, given up, held, deferred, skipped (and why) or paused — and the pass's report lists one
row per job and outcome, with the span of its occurrences (the JSON rows name the job's zone;
the human lines show them in the display zone, `timeparse.display_zone`). The counts in the
JSON document add up: an occurrence is never both "given up" and "ran". The human lines are made
here, from the same rows, so the two never tell different stories."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...timeparse import display_zone, duration_text, format_ms
from ..policy.jitter import jitter_offset_ms
from ..timeline.admission import AdmissionReport
from ..timeline.catchup import SKIP_COUNT_CAP, missed_between, skipped_count
from ..timeline.schedule import job_zone_name, local_time
from .failures import FAILED_STATUSES

#: the fates of an occurrence in a pass, in the order the report lists them
FATES = ("ran", "failed", "given_up", "would_run", "held", "deferred", "skipped", "paused")


@dataclass
class PassReport:
    """What one scheduler pass did; `to_json()` is the document `cron tick --json` prints and
    `lines()` what it prints without --json."""

    boot_id: str
    now_ms: int
    workspace: Path
    store_exists: bool = True
    reconciled: dict[str, Any] = field(default_factory=lambda: {
        "recoveredBeforeStart": 0, "ownerLostAfterStart": 0, "settledFromTerminal": 0, "executionIds": []})
    runs: list[dict[str, Any]] = field(default_factory=list)
    deferred: list[dict[str, Any]] = field(default_factory=list)
    skipped: str | None = None
    no_future: list[str] = field(default_factory=list)
    admission: AdmissionReport = field(default_factory=AdmissionReport)
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)  # the store's jobs by id (schedules, zones)
    policy: dict[str, Any] = field(default_factory=lambda: {"jobs": {}})
    host: str = ""  # the host this pass ran on (cron/policy/hosts.py)
    #: due jobs pinned to another host (--host), left alone by this pass
    elsewhere: list[dict[str, Any]] = field(default_factory=list)
    #: what the pass's sweep of message lifetimes did (cron/run/lifetime_sweep.py)
    lifetimes: list[dict[str, Any]] = field(default_factory=list)

    def see(self, store: dict[str, Any], policy: dict[str, Any]) -> None:
        """The store and policy the pass works on: the report reads schedules and zones from them."""
        self.jobs = {job["id"]: job for job in store["jobs"]}
        self.policy = policy

    def to_json(self, warnings: list[str]) -> dict[str, Any]:
        outcomes = self.outcomes()
        counts: dict[str, int] = {}  # the fates that happened, in FATES order
        for fate in FATES:
            total = sum(_number(row["count"]) for row in outcomes if row["fate"] == fate)
            if total:
                counts[fate] = total
        doc: dict[str, Any] = {
            "ok": True, "bootId": self.boot_id, "now_ms": self.now_ms, "workspace": str(self.workspace),
            "store_exists": self.store_exists, "reconciled": self.reconciled, "runs": self.runs,
            "deferred": self.deferred, "waiting": self.admission.waiting,
            "skippedOccurrences": self.admission.skipped, "paused": self.admission.paused,
            "givenUp": self.admission.given_up,
            "skipped_missed_total": sum(skipped_count(r) for r in self.runs),
            "outcomes": outcomes, "occurrences": {**counts, "total": sum(counts.values())},
            "warnings": warnings, "host": self.host, "pinnedElsewhere": self.elsewhere, "lifetimes": self.lifetimes,
        }
        if self.skipped:
            doc["skipped"] = self.skipped
        return doc

    # --- one row per job and outcome ----------------------------------------------------------------

    def outcomes(self) -> list[dict[str, Any]]:
        """One row per job and outcome: `fate`, how many occurrences (`count`) and their span
        (`firstMs`, `lastMs`, `zone`); a run's row has its `trigger`, `status` and `executionId`,
        a skip its `reason`, a held or given-up occurrence when the agent was last seen."""
        given_up = {row["jobId"]: row for row in self.admission.given_up}
        rows = []
        for run in self.runs:
            count: int | str = 1 + run["skipped_occurrences"] if isinstance(run.get("skipped_occurrences"), int) \
                else (f">{SKIP_COUNT_CAP}" if run.get("skipped_occurrences") else 1)
            fate = ("given_up" if run["jobId"] in given_up and run["trigger"] != "manual"
                    else "would_run" if run["status"] == "would_run"
                    else "failed" if run["status"] in FAILED_STATUSES else "ran")
            first = run["scheduledForMs"]
            row = self._row(run, fate, count, first, run.get("skipped_last_ms") or first)
            row.update({k: run[k] for k in ("trigger", "status", "executionId")})
            if fate == "given_up":
                held = given_up[run["jobId"]]
                row.update(agentLastSeenMs=held["agentLastSeenMs"], holdMaxMs=held["holdMaxMs"])
            rows.append(row)
        for held in self.admission.waiting:
            rows.append({**self._due_row(held, "held", held["dueSinceMs"]), "giveUpAtMs": held["giveUpAtMs"],
                         "holdMaxMs": held["holdMaxMs"], "agentLastSeenMs": held["agentLastSeenMs"],
                         **({"reason": held["reason"], "detail": held["detail"]} if "detail" in held else {})})
        for job in self.deferred:
            rows.append({**self._due_row(job, "deferred", job["nextRunAtMs"]),
                         **{k: job[k] for k in ("reason", "maxCatchup") if k in job}})
        for skip in self.admission.skipped:
            rows.append({**self._row(skip, "skipped", skip["count"], skip["firstMs"], skip["lastMs"]),
                         "reason": skip["reason"], "detail": skip["detail"]})
        for paused in self.admission.paused:
            stored = self.jobs.get(paused["jobId"])
            due = stored["lifecycle"].get("nextRunAtMs") if stored is not None else None
            row = (self._due_row(paused, "paused", due) if due is not None and due <= self.now_ms
                   else self._row(paused, "paused", 0, None, None))
            rows.append({**row, "reason": paused["reason"], "message": paused["message"]})
        return rows

    def _row(self, item: dict[str, Any], fate: str, count: int | str, first: int | None,
             last: int | None) -> dict[str, Any]:
        job = self.jobs.get(item["jobId"])
        zone = job_zone_name(job, self.policy["jobs"].get(job["id"])) if job is not None else "UTC"
        return {"jobId": item["jobId"], "name": item["name"], "fate": fate, "count": count, "firstMs": first,
                "lastMs": last, "zone": zone}

    def _due_row(self, item: dict[str, Any], fate: str, due: int) -> dict[str, Any]:
        """A row for the occurrences due from `due` up to now (held, deferred, paused: still due),
        each with the job's --jitter (one whose offset has not come is not due yet)."""
        job = self.jobs.get(item["jobId"])
        offset = jitter_offset_ms(item["jobId"], (self.policy["jobs"].get(item["jobId"]) or {}).get("jitterMs"))
        more = missed_between(job["schedule"], due, self.now_ms - offset) if job is not None else None
        if more is None:
            return self._row(item, fate, 1, due, due)
        extra, _, last = more
        return self._row(item, fate, 1 + extra if isinstance(extra, int) else f">{SKIP_COUNT_CAP}", due, last)

    # --- the human report -----------------------------------------------------------------------------

    def lines(self) -> list[str]:
        """What `cron tick` prints: one line per row of `outcomes()` (after the reconciliation)."""
        lines = []
        rec = self.reconciled
        if rec["executionIds"]:
            lines.append(f"reconciled {len(rec['executionIds'])} claim(s): {rec['recoveredBeforeStart']} recovered "
                         f"before start, {rec['ownerLostAfterStart']} owner lost after start, "
                         f"{rec['settledFromTerminal']} settled from terminal")
        runs = iter(self.runs)  # the first rows are the runs', in their order
        for row in self.outcomes():
            lines.append(self._line(row, next(runs) if "trigger" in row else None))
        words = {"expired": "withdrawn: expired unread", "missed": "not read within its deadline"}
        lines += [f"message {row['stem']} in {row['session']}: {words[row['event']]}" for row in self.lifetimes
                  if row["event"] in words]
        return lines

    def idle_text(self, scheduled: bool, next_run: dict[str, Any] | None) -> str:
        """What a pass that had nothing to tell says (`cron tick` notes it, `-q` drops it): nothing
        was due, and the next run on the jobs' timelines (`next_run`: `JobPreviews.next_due`, the
        run `cron next`, `cron list` and `status` show first; `scheduled`: whether a job of the
        user's is scheduled at all), or the due jobs it left to the hosts they are pinned to."""
        if self.elsewhere:
            pinned = ", ".join(f"{row['name']} ({row['host']})" for row in self.elsewhere[:5])
            return f"nothing run on {self.host}: {len(self.elsewhere)} due job(s) pinned to other hosts: {pinned}"
        if not scheduled:
            return "nothing due: no job is scheduled"
        if next_run is None:
            return "nothing due: no job has a run ahead (sxctl cron list says why)"
        mark = f" ({next_run['mark']})" if next_run.get("mark") else ""
        return f"nothing due; next run: {next_run['job']} at {self.when(next_run['at_ms'])}{mark}"

    def _line(self, row: dict[str, Any], run: dict[str, Any] | None) -> str:
        name, fate = row["name"], row["fate"]
        if fate == "given_up":
            verb = "would give up" if run is not None and run["status"] == "would_run" else "gave up"
            return (f"{verb} {name}: {self.what(row, single='due')}, {self._agent(row)} "
                    f"(longer than its --hold-max, {duration_text(row['holdMaxMs'])})")
        if run is not None:
            return self._run_line(row, run)
        if fate == "held" and "detail" in row:  # a spend guard (cron/spend/guards.py)
            return f"waiting {name}: {self.what(row, single='due since')}, {row['detail']} ({self._hold_end(row)})"
        if fate == "held":
            return f"waiting {name}: {self.what(row, single='due since')}, {self._agent(row)} ({self._hold_end(row)})"
        if fate == "deferred":
            why = (f"catch-up budget, --max-catchup {row['maxCatchup']}" if row.get("reason") == "max_catchup"
                   else "more than --max-per-pass due")
            return f"deferred {name}: {self.what(row, single='due')} ({why})"
        if fate == "skipped":
            return f"skipped {name}: {self.what(row)} ({row['detail']})"
        return f"paused {name}: {row['message']}"

    def _hold_end(self, row: dict[str, Any]) -> str:
        """When a held run is given up (`hold.renewed_until`): at a time, or never while each new
        occurrence renews the hold; a one-shot a guard holds waits until the guard lets it go."""
        if row["giveUpAtMs"] is not None:
            return f"gives up at {self.when(row['giveUpAtMs'])}"
        if (self.jobs.get(row["jobId"]) or {}).get("schedule", {}).get("kind") == "at":
            return "a one-shot waits until the guard lets it go"
        return f"waits as long as it takes: each occurrence renews its --hold-max, {duration_text(row['holdMaxMs'])}"

    def _run_line(self, row: dict[str, Any], run: dict[str, Any]) -> str:
        detail = run.get("errorKind") or ""
        outcome = run.get("outcome") or {}
        if outcome.get("kind") == "inbox_dispatch":
            detail = f"→ {outcome['sessionId']}/{outcome['stem']} ({outcome['mode']})"
        if run.get("reason"):  # a run that did not succeed says why, with or without -q
            detail = run["reason"].removeprefix(f"{run['status']} ")
        if run.get("replaced"):  # --overlap replace: what became of the unread message before it
            detail = f"{detail}, replacing {run['replaced']['stem']} ({run['replaced']['state']})"
        trigger = run["trigger"]
        if row["count"] != 1:
            trigger = f"{trigger} for {self.what(row)}"
        elif trigger == "catchup":
            trigger = f"{trigger}, {self.what(row, single='due')}"
        return f"ran {run['name']} ({trigger}): {run['status']} {detail}".rstrip()

    # --- times ----------------------------------------------------------------------------------------

    def what(self, row: dict[str, Any], *, single: str = "1 occurrence at") -> str:
        """`due 09:00 UTC`, `3 occurrences, 07:00–09:00 UTC`, `51 occurrences, 2026-12-01 08:49 –
        2026-12-02 09:49 UTC`: dates when the span is not today or crosses a day, in the display zone."""
        count, first, last = row["count"], row["firstMs"], row["lastMs"]
        if first is None:
            return f"{count} occurrence(s)"
        if count == 1 or last is None or last == first:
            return f"{single} {self.when(first)}"
        shown = f"more than {SKIP_COUNT_CAP}" if isinstance(count, str) else count
        return f"{shown} occurrences, {self.span(first, last)}"

    @functools.cached_property
    def shown_in(self):
        """The zone the human lines show times in: the display zone (a job's own never changes it)."""
        return display_zone()

    def when(self, ms: int) -> str:
        """One time, labelled: `09:00 CEST` today, `2026-12-01 09:00 CET` another day."""
        return format_ms(ms, f"{self._day_fmt(ms)}{_clock_fmt(ms)} %Z", self.shown_in)

    def span(self, first: int, last: int) -> str:
        """`07:00–09:00 CEST`; each end labelled when a clock change lies between them."""
        zone, clock = self.shown_in, _clock_fmt(first, last)
        label = "" if format_ms(first, "%Z", zone) == format_ms(last, "%Z", zone) else " %Z"
        if _date(first, zone) == _date(last, zone):
            return (f"{format_ms(first, self._day_fmt(first) + clock + label, zone)}–"
                    f"{format_ms(last, f'{clock} %Z', zone)}")
        day = "%Y-%m-%d " + clock
        return f"{format_ms(first, day + label, zone)} – {format_ms(last, f'{day} %Z', zone)}"

    def _day_fmt(self, ms: int) -> str:
        return "" if _date(ms, self.shown_in) == _date(self.now_ms, self.shown_in) else "%Y-%m-%d "

    def _agent(self, row: dict[str, Any]) -> str:
        """`no live agent since T`, T when an agent was last seen there (its stats.json)."""
        seen = row.get("agentLastSeenMs")
        if seen is None:
            return "no agent seen there yet"
        return f"no live agent since {self.when(seen)}"


def _date(ms: int, zone):
    moment = local_time(ms, zone)
    return moment.date() if moment is not None else None


def _clock_fmt(*times: int) -> str:
    """`%H:%M`, with seconds when one of the times is not on a minute."""
    return "%H:%M:%S" if any(ms % 60_000 for ms in times) else "%H:%M"


def _number(count: int | str) -> int:
    return count if isinstance(count, int) else SKIP_COUNT_CAP
