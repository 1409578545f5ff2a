"""The Kubernetes engine: a batch/v1 CronJob that runs one pass a minute in a pod mounting the
project, parsed back by a YAML parser before it is printed."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..cron.policy.hosts import HOST_ENV
from ..errors import UsageError
from ..project import ProjectLayout
from ..version import __version__
from .values import ReadBackError, TickCommand, check_env, check_value, refuse_value, shown

_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_IMAGE_PATH = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
#: an image reference as the container tools read it: [registry[:port]/]path[:tag][@digest]
_IMAGE_REFERENCE = re.compile(
    rf"(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::[0-9]+)?/)?{_IMAGE_PATH}(?:/{_IMAGE_PATH})*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?")
_KEY = re.compile(r"[A-Za-z][A-Za-z0-9./-]*")


def _yaml_scalar(value: Any) -> str:
    """Every scalar quoted: a string as a JSON string (valid YAML double-quoted), a number as is."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(f"not a scalar sxctl writes: {value!r}")
    return json.dumps(value, ensure_ascii=False)


def to_yaml(value: dict[str, Any], notes: Mapping[str, str] = {}, indent: int = 0) -> str:
    """Block YAML of a manifest (mappings of fixed keys; every scalar quoted; a list of scalars
    in flow style), with a comment after the keys `notes` names."""
    lines = []
    pad = " " * indent
    for key, item in value.items():
        if not _KEY.fullmatch(key):
            raise TypeError(f"not a key sxctl writes: {key!r}")
        note = f"  # {notes[key]}" if key in notes else ""
        if isinstance(item, dict):
            lines.append(f"{pad}{key}:{note}\n{to_yaml(item, notes, indent + 2)}")
        elif isinstance(item, list) and all(not isinstance(x, dict | list) for x in item):
            lines.append(f"{pad}{key}: [{', '.join(_yaml_scalar(x) for x in item)}]{note}\n")
        elif isinstance(item, list):
            lines.append(f"{pad}{key}:{note}\n")
            for element in item:
                body = to_yaml(element, notes, indent + 4)
                lines.append(f"{pad}  - {body[indent + 4:]}")
        else:
            lines.append(f"{pad}{key}: {_yaml_scalar(item)}{note}\n")
    return "".join(lines)


def _k8s_literal(text: str) -> str:
    """A container's `command` item or env `value` exactly as given: Kubernetes expands `$(NAME)`
    there and reads `$$` as `$`, so every `$` is doubled."""
    return text.replace("$", "$$")


def cronjob_env(tick: TickCommand) -> tuple[tuple[str, str], ...]:
    """The CronJob's variables: `SXCTL_HOST` set to the CronJob's name first — each pass runs in
    a new pod, whose host name is the pod's, so without it every minute is a new host (its own
    heartbeat file and metrics series, and no `--host` pin could name it) — unless `--env` gives
    one (checked as a host name by `check_env`), then the `--env` pairs."""
    if HOST_ENV in dict(tick.env):
        return tick.env
    return ((HOST_ENV, cronjob_name(tick)), *tick.env)


def cronjob_name(tick: TickCommand) -> str:
    """The CronJob's name (metadata.name), which is also the host its passes run as."""
    return tick.unit_name[:52]


def cronjob_manifest(tick: TickCommand, *, image: str, pvc: str, mount: str, uid: int, gid: int) -> str:
    """A batch/v1 CronJob that runs one pass a minute in a pod that mounts the project (exit 2
    when a value cannot be written into it), parsed back by a YAML parser before it is returned:
    one document, one CronJob, exactly the intended values."""
    check_value("the project path", str(tick.project), "kubernetes")
    check_value("--image", image, "kubernetes")
    check_value("--mount", mount, "kubernetes")
    check_value("--pvc", pvc, "kubernetes")
    check_env(tick.env, "kubernetes")
    tick.check_options("kubernetes")
    variables = cronjob_env(tick)
    host = dict(variables)[HOST_ENV]
    if not mount.startswith("/"):
        raise UsageError(f"--mount {shown(mount)} must be an absolute path in the container")
    if mount.rstrip("/") == "" or any(part in (".", "..") for part in mount.split("/")):
        raise refuse_value("--mount", mount, "kubernetes", "the project's folder in the container must be a plain "
                           "absolute path below / (no '.' or '..'; not / itself, which would cover the image)")
    if len(pvc) > 253 or not _DNS_SUBDOMAIN.fullmatch(pvc):
        raise refuse_value("--pvc", pvc, "kubernetes", "not a PersistentVolumeClaim name (lowercase letters, "
                           "digits, '-' and '.', at most 253)")
    if len(image) > 512 or not _IMAGE_REFERENCE.fullmatch(image):
        raise refuse_value("--image", image, "kubernetes", "not an image reference "
                           "([registry[:port]/]name[:tag][@digest], e.g. ghcr.io/acme/sxctl:1.2)")
    project = mount.rstrip("/") or "/"
    container: dict[str, Any] = {
        "name": "sxctl-tick",
        "image": image,
        "command": [_k8s_literal(word) for word in ("sxctl", "--project", project, "cron", "tick", "--busy-ok", "-q",
                                                    *tick.pass_options())],
    }
    container["env"] = [{"name": name, "value": _k8s_literal(value)} for name, value in variables]
    container["volumeMounts"] = [{"name": "project", "mountPath": project}]
    security: dict[str, Any] = {"runAsUser": uid, "runAsGroup": gid, "fsGroup": gid}
    if uid != 0:
        security["runAsNonRoot"] = True
    manifest: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": cronjob_name(tick),
                     "labels": {"app.kubernetes.io/name": "sxctl-tick", "app.kubernetes.io/version": __version__}},
        "spec": {
            "schedule": "* * * * *",
            "timeZone": "Etc/UTC",
            "concurrencyPolicy": "Forbid",
            "startingDeadlineSeconds": 50,
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 3,
            "jobTemplate": {"spec": {
                "backoffLimit": 0,
                "activeDeadlineSeconds": 600,
                "template": {"spec": {
                    "restartPolicy": "Never",
                    "securityContext": security,
                    "containers": [container],
                    "volumes": [{"name": "project", "persistentVolumeClaim": {"claimName": pvc}}],
                }},
            }},
        },
    }
    notes = {
        "concurrencyPolicy": "one pass at a time (sxctl's lock would refuse the second anyway)",
        "startingDeadlineSeconds": "a pass that cannot start within the minute is skipped, not queued",
        "backoffLimit": "a failed pass is not retried: the next minute's pass comes",
        "securityContext": "the owner of the agent's files (sxctl writes 0600 files)",
    }
    text = (f"# sxctl scheduler pass for {tick.project}, every minute (sxctl cron export --target kubernetes).\n"
            f"# The project folder is on the volume {pvc}, mounted at {project}. Kubernetes may start a Job\n"
            "# twice or not at all; sxctl's store lock and claims keep every run at most once, and a missed\n"
            "# minute shows in `sxctl doctor` (the heartbeat) and in the ledger. Every pod is one host for sxctl,\n"
            f"# {HOST_ENV}={host}: one heartbeat, one metrics series, and the name a job is pinned to\n"
            f"# (sxctl cron update NAME --host {host}); a second cluster on this volume takes --env {HOST_ENV}=OTHER.\n"
            + to_yaml(manifest, notes))
    check_manifest(text, manifest)
    return text


def check_manifest(text: str, manifest: dict[str, Any]) -> None:
    """A YAML parser must read `text` as exactly one document equal to `manifest`."""
    import yaml  # here, not at the top: a heavy import only `--target kubernetes` needs

    try:
        documents = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as error:
        raise ReadBackError("kubernetes", f"not YAML: {str(error).splitlines()[0]}") from None
    if len(documents) != 1:
        raise ReadBackError("kubernetes", f"{len(documents)} objects instead of one CronJob")
    if documents[0] != manifest:
        raise ReadBackError("kubernetes", "the CronJob reads back with other values")


def project_owner(project: Path) -> tuple[int, int]:
    """The uid/gid that own the agent's files (its `.scorpiox/`, else the project folder)."""
    for path in (ProjectLayout(project).scorpiox, project):
        try:
            st = os.stat(path)
        except OSError:
            continue
        return st.st_uid, st.st_gid
    return os.getuid(), os.getgid()
