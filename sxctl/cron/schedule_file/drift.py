"""Drift: how the store has moved from what the last `cron apply` left (the policy file's `applied`
record) — a managed job edited, renamed or removed by hand, a workspace setting changed — and
whether the schedule file itself changed since. `cron plan`, `status` and `doctor` say the same."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import SxctlError
from ...fsio import read_data_file
from .applied import LONG_KEYS, applied_of, fingerprint, same_setting, workspace_setting
from .declared import declared_of, shown


@dataclass
class Drift:
    """`jobs`: one `{name, jobId, change, fields}` per managed job that moved (`change`: edited,
    renamed, removed, undeclarable; `fields`: key -> {applied, now}); `workspace`: the settings
    that moved; `file_changed`: the file the last apply read no longer has its digest (None: no
    apply yet, or the file is gone)."""

    applied: bool
    file: str | None = None
    file_changed: bool | None = None
    jobs: list[dict[str, Any]] = field(default_factory=list)
    workspace: list[str] = field(default_factory=list)

    @property
    def moved(self) -> bool:
        return bool(self.jobs or self.workspace)

    def lines(self) -> list[str]:
        """The drift in words, one line per job or setting."""
        found = []
        for job in self.jobs:
            if job["change"] == "removed":
                found.append(f"{job['name']}: removed by hand since the last cron apply")
            elif job["change"] == "undeclarable":
                found.append(f"{job['name']}: changed by hand into a job a schedule file cannot declare")
            else:
                fields = ", ".join(key if key in LONG_KEYS else f"{key} {shown(key, value['applied'])} -> "
                                   f"{shown(key, value['now'])}" for key, value in job["fields"].items())
                found.append(f"{job['name']}: {job['change']} by hand since the last cron apply ({fields})")
        found += [f"workspace {key}: changed by hand since the last cron apply" for key in self.workspace]
        return found

    def to_json(self) -> dict[str, Any]:
        return {"applied": self.applied, "file": self.file, "fileChanged": self.file_changed,
                "jobs": self.jobs, "workspace": self.workspace}


def drift_of(store: dict[str, Any], policy: dict[str, Any], workspace: Path) -> Drift:
    """THE drift of the store and policy file from the last apply."""
    if "applied" not in policy:
        return Drift(False)
    applied = applied_of(policy)
    by_id = {record["id"]: record for record in store["jobs"]}
    drift = Drift(True, applied["file"], _file_changed(workspace / applied["file"], applied["digest"]))
    for job_id, kept in applied["jobs"].items():
        if kept.get("pruned") or kept.get("kept"):  # removed by `--prune`, or no longer declared: not drift
            continue
        record = by_id.get(job_id)
        if record is None:
            drift.jobs.append({"name": kept["name"], "jobId": job_id, "change": "removed", "fields": {}})
            continue
        declared = declared_of(record, policy["jobs"].get(job_id, {}), workspace)
        if declared is None:
            drift.jobs.append({"name": kept["name"], "jobId": job_id, "change": "undeclarable", "fields": {}})
            continue
        now = fingerprint(declared)
        fields = {key: {"applied": value, "now": now.get(key)} for key, value in kept["declared"].items()
                  if now.get(key) != value}
        if record["name"] != kept["name"]:
            fields = {"name": {"applied": kept["name"], "now": record["name"]}, **fields}
        if fields:
            drift.jobs.append({"name": kept["name"], "jobId": job_id,
                               "change": "renamed" if "name" in fields else "edited", "fields": fields})
    for key, value in applied["workspace"].items():
        if not same_setting(key, workspace_setting(policy, key), value):
            drift.workspace.append(key)
    return drift


def _file_changed(path: Path, digest: str) -> bool | None:
    """Whether what the file the last apply read says has changed since (its comments and layout
    aside; a file that is no longer TOML has changed); None: it is not there to say."""
    from .read import FILE_CAP, content_digest, parse_toml  # TOML is read only where an apply was made

    try:
        raw = read_data_file(Path(os.path.realpath(path)), FILE_CAP)  # a link followed, as the reader does
    except SxctlError:  # a FIFO, a folder: not there to read
        return None
    if raw is None:
        return None
    try:
        return content_digest(parse_toml(path, raw)[1]) != digest
    except SxctlError:  # no longer TOML: changed
        return True
