"""`doctor`'s checks of the hosts that run passes in one workspace (host pinning, cron/policy/hosts.py):
every host's last pass, a pinned job whose host has stopped ticking, and two hosts ticking one
workspace with jobs either may run."""

from __future__ import annotations

import re
import shlex
from typing import Any

from ..cron.policy.file import read_policy
from ..cron.run.heartbeat import FOLDER, trusted_passes
from ..errors import SxctlError
from ..timeparse import format_duration_ms
from .findings import Findings

#: a pinned job whose host has not run a pass for this long fails (as a workspace without passes)
PINNED_HOST_FAIL_MS = 3 * 60_000
#: two hosts that both ran a pass within this span both tick the workspace
TICKING_MS = 60 * 60_000
#: the host name of a pod of the CronJob `cron export --target kubernetes` writes, when the CronJob
#: sets no SXCTL_HOST (an older export): `<cronjob>-<minute of its schedule>-<5 random characters>`
_POD = re.compile(r"(sxctl-tick-[a-z0-9-]+)-[0-9]{6,}-[a-z0-9]{5}")


def _ping_hosts(pings: dict[str, Any]) -> list[str]:
    """`scheme://host[:port]/` of each monitor a host's pings wait for (their paths, often the
    secret, left out), at most three; empty when none can be told."""
    from ..cron.run.pings import mask_url  # urllib loads only for pings

    roots = [mask_url(item["url"]).removesuffix("/…") for item in pings.get("pending", [])]
    return list(dict.fromkeys(f"{root}/" for root in roots if root != "…"))[:3]


def check_pings(found: Findings, ws, now: int) -> None:
    """Pings (--ping-url) that a host's last pass could not send: the monitor is not told, so it
    warns (the pass goes on, and sends them again), with the curl that tries each monitor's host.
    Reported only when there are some."""
    for host, beat in sorted(trusted_passes(ws, now).items()):
        pings = beat.get("pings") or {}
        if pings.get("pending") or pings.get("dropped"):
            waiting = len(pings.get("pending", []))
            tries = "; ".join(f"curl -fsS -m 10 {shlex.quote(root)}" for root in _ping_hosts(pings)) \
                or "curl -fsS -m 10 https://YOUR-PING-HOST/"
            found.add("pings", "warn", f"on {host}, {waiting} ping(s) wait to be sent again"
                      + (f" and {pings['dropped']} were dropped" if pings.get("dropped") else "")
                      + f": {pings.get('lastError') or 'the pass ran out of its ping time'}",
                      f"{tries}   # on {host}: can it reach the monitor? (the next pass sends them again)")


def check_hosts(found: Findings, ws, store: dict[str, Any], now: int) -> None:
    """Reported only when it matters: more than one host has a heartbeat here, or a job is pinned.
    Pods of an exported CronJob that sets no SXCTL_HOST (each pass a new host) count as their
    CronJob, and are a warning of their own: they are never offered as a host to pin a job to."""
    beats = trusted_passes(ws, now)
    try:
        entries = read_policy(ws)["jobs"]
    except SxctlError:  # the cron files check names it
        return
    jobs = [job for job in store["jobs"] if job["lifecycle"]["status"] == "scheduled" and job["source"] != "built_in"]
    pinned = {job["name"]: entries[job["id"]]["host"] for job in jobs if entries.get(job["id"], {}).get("host")}
    pods = {host: match.group(1) for host in beats if (match := _POD.fullmatch(host))}
    _check_pods(found, ws, {host: cronjob for host, cronjob in pods.items()
                            if now - beats[host]["lastPassMs"] <= TICKING_MS})
    if len(beats) < 2 and not pinned:
        return

    def ago(host: str) -> str:
        return f"{host} {format_duration_ms(max(now - beats[host]['lastPassMs'], 0))} ago ({beats[host]['outcome']})"

    listed = [ago(host) for host in sorted(beats) if host not in pods]
    if pods:
        newest = max(pods, key=lambda host: beats[host]["lastPassMs"])
        listed.append(f"{len(pods)} pod(s) of {pods[newest]}, the newest {ago(newest)}")
    shown = "last passes: " + ", ".join(listed) if beats else "no host has run a pass"
    stopped = {name: host for name, host in pinned.items()
               if host not in beats or now - beats[host]["lastPassMs"] > PINNED_HOST_FAIL_MS}
    ticking = sorted({pods.get(host, host) for host, beat in beats.items() if now - beat["lastPassMs"] <= TICKING_MS})
    free = [job["name"] for job in jobs if job["name"] not in pinned]
    if stopped:
        name, host = next(iter(stopped.items()))
        more = f" (and {len(stopped) - 1} more pinned job(s))" if len(stopped) > 1 else ""
        since = (f"has not run a pass for {format_duration_ms(now - beats[host]['lastPassMs'])}" if host in beats
                 else "has never run a pass here")
        pod = _POD.fullmatch(host)
        fix = (f"sxctl cron update {name} --host {pod.group(1)}   # {host} was one pass's pod: pin to its CronJob, "
               "once its export sets SXCTL_HOST" if pod else
               f"start the pass on {host} (sxctl cron export --install there), or: sxctl cron update {name} --host any")
        found.add("hosts", "fail", f"job {name} is pinned to host {host}, which {since}{more}; {shown}", fix)
    elif len(ticking) > 1 and free:
        found.add("hosts", "warn", f"{len(ticking)} hosts ({', '.join(ticking)}) run passes in this workspace and "
                  f"{len(free)} job(s) ({', '.join(free[:3])}{'…' if len(free) > 3 else ''}) are pinned to none: "
                  f"whichever host's pass comes first runs them (the claims keep each run at most once); {shown}",
                  f"sxctl cron update {free[0]} --host {ticking[0]}   # pin each job to the host that should run it")
    else:
        found.add("hosts", "ok", shown + (f"; {len(pinned)} pinned job(s)" if pinned else ""))


def _check_pods(found: Findings, ws, pods: dict[str, str]) -> None:
    """A warning per CronJob whose pods ran passes in the last hour as hosts of their own."""
    for cronjob in sorted(set(pods.values())):
        count = sum(1 for name in pods.values() if name == cronjob)
        found.add("hosts", "warn", f"{count} pod(s) of the Kubernetes CronJob {cronjob} ran passes here in the last "
                  "hour, each as a host of its own (the CronJob sets no SXCTL_HOST): each leaves its own heartbeat "
                  "file and metrics series, and no job can be pinned to one",
                  f"sxctl cron export --target kubernetes --pvc PVC --image IMAGE | kubectl apply -f -   # sets "
                  f"SXCTL_HOST={cronjob}; then: rm {shlex.quote(str(ws.scheduler / FOLDER))}/{cronjob}-*.json")
