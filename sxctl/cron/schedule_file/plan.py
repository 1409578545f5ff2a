"""What `cron apply` changes, decided once (`plan_of`) and carried out once (`carry_out`): `cron plan`
carries it out on copies to find every error apply would meet, `cron apply` on the store it holds
locked. Only jobs an apply created, or adopted unchanged, are managed (the policy file's `applied`
record keeps their ids): `--prune` removes managed jobs the file no longer has, and a job made by
hand is never changed — a file that names one differently is refused."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import ConflictError, ErrorCode, SxctlError, UsageError
from ...report import Reporter
from ...timeparse import duration_text
from ..policy.file import PolicyOptions
from ..spend.rules import GuardOptions
from ..store import authoring
from ..store.authoring import JobSpec, Target, WakeGate
from ..store.targets import resolve_project
from ..store.transaction import job_change
from ..timeline.schedule import ScheduleInput
from .applied import applied_of, recorded, same_setting, workspace_setting
from .declared import KEYS, declared_of, default_of, differences, instant_text, shown, wall_text
from .read import ScheduleFile

SCHEDULE_KEYS = ("cron", "every", "anchor", "at", "tz")
#: keys comis keeps for the life of a job (`cron update` refuses them)
FIXED_KEYS = ("session-strategy", "max-history-turns", "continuation", "agent")



@dataclass
class JobStep:
    """One job's part of a plan. `action`: add, update, remove, adopt (a job made by hand that the
    file declares as it is: it becomes managed, unchanged), unchanged, kept (managed, not in the
    file: `--prune` removes it), unmanaged (made by hand, not in the file: never touched), passed
    (a one-shot whose time has passed and that is not in the store: not added). `changes`: key ->
    (now, declared)."""

    name: str
    action: str
    changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    job_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "action": self.action, "jobId": self.job_id,
                "changes": {key: {"from": _plain(key, old), "to": _plain(key, new)}
                            for key, (old, new) in self.changes.items()}}


@dataclass
class Plan:
    """What an apply of `file` changes: its `steps` (every job of the file and of the store) and
    the workspace settings it changes (`workspace`: key -> (now, declared))."""

    file: ScheduleFile
    steps: list[JobStep]
    workspace: dict[str, tuple[Any, Any]]
    record_changes: bool  # the applied record differs (a new digest or path): apply writes it

    @property
    def pending(self) -> bool:
        """Whether an apply would change anything (`cron plan --detailed-exitcode`)."""
        return self.record_changes or bool(self.workspace) or any(
            step.action in ("add", "update", "remove", "adopt") for step in self.steps)

    def counts(self) -> dict[str, int]:
        return {action: sum(1 for step in self.steps if step.action == action)
                for action in ("add", "update", "remove", "adopt", "unchanged", "kept", "unmanaged", "passed")}


def plan_of(file: ScheduleFile, store: dict[str, Any], policy: dict[str, Any], workspace: Path, *,
            prune: bool, now_ms: int, file_label: str) -> Plan:
    """THE plan of an apply of `file` to the store and policy file as they are. Raises what apply
    would refuse: a job made by hand that the file declares otherwise, or one a file cannot
    declare (exit 4); a key comis keeps for a job's life changed (exit 2)."""
    applied = applied_of(policy)
    managed = applied["jobs"]
    by_name = {record["name"]: record for record in store["jobs"]}
    steps: list[JobStep] = []
    kept_record: dict[str, Any] = {}  # the applied record of the jobs an apply with no change keeps
    for name, declared in file.jobs.items():
        record = by_name.get(name)
        if record is None:
            if (declared["at"] if declared["at"] is not None else declared["until"] or now_ms + 1) <= now_ms:
                steps.append(JobStep(name, "passed"))  # a one-shot's time, or a job's --until, has passed
            else:  # what it will be: the keys that are not their defaults, as a review reads them
                steps.append(JobStep(name, "add", {key: (None, value) for key, value in declared.items()
                                                   if key in KEYS and value is not None and key != "fold"
                                                   and value != default_of(key, declared["payload"])}))
            continue
        entry = policy["jobs"].get(record["id"], {})
        current = declared_of(record, entry, workspace)
        if current is None:
            raise ConflictError(f"{file.path}: jobs.{name}: the store's job {name!r} cannot be declared in a schedule "
                                "file (a built-in job, or a target or setting `cron add` cannot make)",
                                code=ErrorCode.NAME_TAKEN, hint="rename the job in the file")
        changes = differences(declared, current)
        if record["id"] not in managed:
            if changes:
                first = ", ".join(f"{key} {shown(key, old)} -> {shown(key, new)}"
                                  for key, (old, new) in list(changes.items())[:3])
                raise ConflictError(f"{file.path}: jobs.{name}: a job made by hand has this name and differs from "
                                    f"the file ({first}); apply never changes such a job", code=ErrorCode.NAME_TAKEN,
                                    hint=f"make the file declare it as it is (`sxctl cron dump` writes it), or rename "
                                         f"the job in the file; `sxctl cron remove {name}` gives the name to the file")
            steps.append(JobStep(name, "adopt", job_id=record["id"]))
            continue
        fixed = [key for key in FIXED_KEYS if key in changes and (key == "agent" or "payload" not in changes)]
        if fixed:
            raise UsageError(f"{file.path}: jobs.{name}: {fixed[0]} cannot change on an existing job (comis keeps it "
                             "for the job's life)", hint="give the job a new name in the file to make a new one "
                                                         "(apply --prune removes the old one)")
        steps.append(JobStep(name, "update" if changes else "unchanged", changes, record["id"]))
        kept_record[record["id"]] = {"name": name, "declared": recorded(declared, current)}
    for record in store["jobs"]:
        if record["name"] in file.jobs:
            continue
        managed_job = record["id"] in managed
        steps.append(JobStep(record["name"], ("remove" if prune else "kept") if managed_job else "unmanaged",
                             job_id=record["id"]))
        if managed_job and not prune:  # no longer declared: no drift to tell, only that --prune removes it
            kept_record[record["id"]] = {"name": record["name"], "declared": {}, "kept": True}
    ws_changes = {key: (workspace_setting(policy, key), value) for key, value in file.workspace.items()
                  if not same_setting(key, workspace_setting(policy, key), value)}
    live = {record["id"] for record in store["jobs"]}
    record_changes = ((applied["digest"], applied["file"]) != (file.digest, file_label)
                      or {job_id: kept for job_id, kept in applied["jobs"].items()
                          if not kept.get("pruned") or job_id in live} != kept_record
                      or {**applied["workspace"], **file.workspace} != applied["workspace"])
    return Plan(file, steps, ws_changes, record_changes)


def _plain(key: str, value: Any) -> Any:
    """A value for JSON output: a ping URL in words (masked, with a digest that tells two apart:
    it is a secret), the rest as normalized."""
    return shown(key, value) if key == "ping-url" and isinstance(value, str) else value


# --- carrying it out ---------------------------------------------------------------------------

def carry_out(plan: Plan, store: dict[str, Any], policy: dict[str, Any], *, workspace: Path, default_project: str,
              agent_id: str, max_jobs: int, now_ms: int, report: Reporter, file_label: str) -> list[str]:
    """Make the plan's changes to `store` and `policy` (documents, edited in place; the caller
    writes them, both or neither): updates, then additions, then the policy edits of each, the
    workspace settings, and the record of this apply. The jobs to remove are not removed here:
    the record marks them `pruned`, still managed, and `remove_pruned` removes them from the
    store; the policy file, written first, keeps their entries (`mutate_store(removing=…)`), so
    a kill between the two writes leaves each one whole, with its policy, for the next `apply
    --prune`. The warnings comis's rules give (a
    target without .scorpiox/, a job faster than the pass) are returned; an error names the job."""
    warnings: list[str] = []
    notes: list[str] = []
    policy_edits = []
    for step in plan.steps:
        if step.action not in ("update", "add"):
            continue
        declared = plan.file.jobs[step.name]
        with about_job(plan.file.path, step.name):
            if step.action == "update":
                spec = spec_of(declared, set(step.changes), adding=False, workspace=workspace)
                effective: dict[str, Any] = {}
                authoring.update_job(store, step.name, spec, default_project=default_project, now_ms=now_ms,
                                     report=report, workspace=workspace, notes=notes, warnings=warnings,
                                     policy_entry=lambda job_id: policy["jobs"].get(job_id, {}), effective=effective)
                _clear(store, step.name, declared, set(step.changes))
                policy_edits.append((step.name, job_change(step.name, spec, resumed=spec.resumed, notes=notes,
                                                           effective=effective)))
            else:
                spec = spec_of(declared, set(KEYS), adding=True, workspace=workspace)
                authoring.add_job(store, step.name, spec, agent_id=declared["agent"] or agent_id,
                                  default_project=default_project, now_ms=now_ms, workspace=workspace,
                                  max_jobs=max_jobs, notes=notes, warnings=warnings)
                policy_edits.append((step.name, job_change(step.name, spec)))
    for name, edit in policy_edits:
        if edit is not None:
            with about_job(plan.file.path, name):
                edit(policy, store, now_ms)
    for key, (_now, declared) in plan.workspace.items():
        _set_workspace(policy, key, declared, now_ms)
    by_name = {record["name"]: record for record in store["jobs"]}
    before = applied_of(policy)["jobs"]
    managed = {step.job_id: ({"name": step.name, "declared": {}, "kept": True} if step.action == "kept"
                             else {**before[step.job_id], "pruned": True})
               for step in plan.steps if step.action in ("kept", "remove") and step.job_id is not None}
    for name in plan.file.jobs:
        record = by_name.get(name)
        if record is not None:
            made = declared_of(record, policy["jobs"].get(record["id"], {}), workspace)
            assert made is not None  # built from the file: a job a file declares
            managed[record["id"]] = {"name": name, "declared": recorded(plan.file.jobs[name], made)}
    policy["applied"] = {"digest": plan.file.digest, "file": file_label, "jobs": managed,
                         "workspace": {**applied_of(policy)["workspace"], **plan.file.workspace}}
    for note in notes:
        report.note(note)
    return warnings


def remove_pruned(store: dict[str, Any], policy: dict[str, Any]) -> list[str]:
    """Remove the jobs the record marks `pruned` that are still in the store; their names."""
    pruned = {job_id for job_id, kept in applied_of(policy)["jobs"].items() if kept.get("pruned")}
    removed = [record["name"] for record in store["jobs"] if record["id"] in pruned]
    for name in removed:
        authoring.remove_job(store, name)
    return removed


@contextmanager
def about_job(path: Path, name: str) -> Iterator[None]:
    """An error of comis's rules while a job of the file is made: it names the file and the job."""
    try:
        yield
    except SxctlError as error:
        error.message = f"{path}: jobs.{name}: {error.message}"
        error.args = (error.message,)
        raise


def _set_workspace(policy: dict[str, Any], key: str, declared: Any, now_ms: int) -> None:
    if key == "max-catchup":
        defaults = {**policy.get("defaults", {}), "maxCatchup": declared}
        if declared is None:
            defaults.pop("maxCatchup")
        policy["defaults"] = defaults
    elif declared is None:
        policy.pop(key, None)
    elif key == "maintenance":
        policy[key] = {**declared, "fromMs": now_ms if declared["fromMs"] is None else declared["fromMs"]}
    else:
        policy[key] = declared


def _clear(store: dict[str, Any], name: str, declared: dict[str, Any], changed: set[str]) -> None:
    """What `cron update` keeps when its flag is not given, cleared where the file left it out:
    an agent turn's model and time limit, the job's dependency-error limit."""
    record = authoring.find_job(store, name)
    for key, holder, stored in (("model", record["payload"], "model"),
                                ("timeout-seconds", record["payload"], "timeoutSeconds"),
                                ("max-dependency-errors", record, "maxConsecutiveDependencyErrors")):
        if key in changed and declared[key] is None:
            holder.pop(stored, None)


def spec_of(declared: dict[str, Any], keys: set[str], *, adding: bool, workspace: Path) -> JobSpec:
    """The `cron add`/`cron update` flags that make a job as `declared` says, for the `keys` that
    change (every key when `adding`): a value the file leaves out given as the flag's clear."""
    d = declared
    schedule = ScheduleInput()
    if adding or keys & set(SCHEDULE_KEYS):
        if not adding and keys & set(SCHEDULE_KEYS) == {"tz"} and d["cron"] is None:
            schedule = ScheduleInput(tz=d["tz"])  # an every/at job's zone alone: kept in the policy file
        else:
            schedule = _schedule_input(d, zone_changes=not adding and "tz" in keys)
    given = (lambda key: key in keys) if not adding else (lambda key: d[key] is not None)
    timeout = d["timeout-seconds"]
    if timeout is not None and timeout % 1000:
        raise UsageError(f"timeout-seconds {timeout} ms: a whole number of seconds")
    gate = None
    if any(given(key) for key in ("wake-gate-script", "wake-gate-language", "wake-gate-timeout")) and \
            d["wake-gate-script"] is not None:
        gate_timeout = d["wake-gate-timeout"]
        if gate_timeout is not None and (gate_timeout % 1000 or not 1000 <= gate_timeout <= 300_000):
            raise UsageError("wake_gate_timeout_seconds must be between 1 and 300")
        gate = WakeGate(d["wake-gate-script"], d["wake-gate-language"] or "js",
                        30 if gate_timeout is None else gate_timeout // 1000)
    target = None
    if d["payload"] != "heartbeat-event" and (adding or keys & {"to", "to-project", "tenant", "payload"}):
        target = Target(str(resolve_project(d["to-project"], workspace)), d["to"], d["tenant"])
    payload_given = adding or "payload" in keys
    return JobSpec(
        schedule=schedule, payload=d["payload"] if payload_given else None,
        text=d["text"] if payload_given or "text" in keys else None,
        wake_mode=d["wake-mode"] if given("wake-mode") else None,
        max_history_turns=d["max-history-turns"] if adding else None,
        session_strategy=d["session-strategy"] if adding and d["payload"] == "agent-turn" else None,
        continuation=d["continuation"] if adding and d["payload"] == "agent-turn" else None,
        model=d["model"] if given("model") else None,
        timeout_seconds=None if timeout is None or not given("timeout-seconds") else timeout // 1000,
        wake_gate=gate, no_wake_gate=not adding and "wake-gate-script" in keys and d["wake-gate-script"] is None,
        target=target, max_dependency_errors=d["max-dependency-errors"] if given("max-dependency-errors") else None,
        paused=bool(d["paused"]) and (adding or "paused" in keys),
        resumed=not adding and "paused" in keys and not d["paused"],
        policy=_options_of(d, keys if not adding else {key for key in KEYS if d[key] is not None}))


def _schedule_input(d: dict[str, Any], zone_changes: bool) -> ScheduleInput:
    """The schedule flags of a declared job: an `every` or `at` time as a wall time in the job's
    zone (with the fold that picks it), as `cron add --tz ZONE --at TIME` reads it; a UTC job's
    as an instant, with no zone to keep (unless it moves to UTC from another zone)."""
    if d["cron"] is not None:
        return ScheduleInput(cron=d["cron"], tz=d["tz"])
    zone = d["tz"] if d["tz"] != "UTC" or zone_changes else None
    moment = d["at"] if d["at"] is not None else d["anchor"]
    text = fold = None
    if moment is not None:
        text, fold = wall_text(moment, zone) if zone is not None else (instant_text(moment), None)
    if d["at"] is not None:
        return ScheduleInput(at=text, tz=zone, fold=fold)
    return ScheduleInput(every=duration_text(d["every"]), anchor=text, tz=zone, fold=fold)


def _options_of(d: dict[str, Any], keys: set[str]) -> PolicyOptions:
    """The policy flags for the `keys` that change, each cleared where the file leaves it out
    (active hours and days, and catch-up with its stale-after, go together)."""
    if keys & {"active-hours", "active-days"}:
        keys = keys | {"active-hours", "active-days"}
    if keys & {"catch-up", "stale-after"}:
        keys = keys | {"catch-up", "stale-after"}

    def pick(key: str, clear: Any, convert=lambda value: value) -> Any:
        if key not in keys:
            return None
        return clear if d[key] is None else convert(d[key])

    def seconds(ms: int) -> float:
        return ms / 1000

    return PolicyOptions(
        hold_max=pick("hold-max", None, seconds), catch_up=pick("catch-up", None),
        stale_after=pick("stale-after", None, seconds), missed_note=pick("missed-note", None),
        max_unconsumed=pick("max-unconsumed", 0), max_runs_per_day=pick("max-runs-per-day", 0),
        until=pick("until", "none", instant_text), max_runs=pick("max-runs", 0),
        active_hours=pick("active-hours", "none"), active_days=pick("active-days", "none"),
        overlap=pick("overlap", None), jitter=pick("jitter", 0, seconds), host=pick("host", "any"),
        ping_url=pick("ping-url", "none"), ping_on=pick("ping-on", "written"),
        expires=pick("expires", 0, seconds), read_within=pick("read-within", 0, seconds),
        guards=GuardOptions(pick("rate-limit-ceiling", 0), pick("max-session-tokens", 0),
                            pick("max-tokens-per-day", 0), pick("on-missing-usage", "default")))
