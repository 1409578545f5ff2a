"""`doctor`'s checks of the hosts that run passes in one workspace (host pinning, cron/policy/hosts.py):
every host's last pass, a pinned job whose host has stopped ticking, and two hosts ticking one
workspace with jobs either may run."""

from __future__ import annotations

from typing import Any

from ..cron.policy.file import read_policy
from ..cron.run.heartbeat import trusted_passes
from ..errors import SxctlError
from .findings import Findings

#: a pinned job whose host has not run a pass for this long fails (as a workspace without passes)
PINNED_HOST_FAIL_MS = 3 * 60_000
#: two hosts that both ran a pass within this span both tick the workspace
TICKING_MS = 60 * 60_000


def check_pings(found: Findings, ws, now: int) -> None:
    """Pings (--ping-url) that a host's last pass could not send: the monitor is not told, so it
    warns (the pass goes on, and sends them again). Reported only when there are some."""
    for host, beat in sorted(trusted_passes(ws, now).items()):
        pings = beat.get("pings") or {}
        if pings.get("pending") or pings.get("dropped"):
            waiting = len(pings.get("pending", []))
            found.add("pings", "warn", f"on {host}, {waiting} ping(s) wait to be sent again"
                      + (f" and {pings['dropped']} were dropped" if pings.get("dropped") else "")
                      + f": {pings.get('lastError') or 'the pass ran out of its ping time'}",
                      "curl -fsS -m 10 https://YOUR-PING-HOST/   # can this host reach the monitor? "
                      "(the next pass sends them again)")


def check_hosts(found: Findings, ws, store: dict[str, Any], now: int) -> None:
    """Reported only when it matters: more than one host has a heartbeat here, or a job is pinned."""
    beats = trusted_passes(ws, now)
    try:
        entries = read_policy(ws)["jobs"]
    except SxctlError:  # the cron files check names it
        return
    jobs = [job for job in store["jobs"] if job["lifecycle"]["status"] == "scheduled" and job["source"] != "built_in"]
    pinned = {job["name"]: entries[job["id"]]["host"] for job in jobs if entries.get(job["id"], {}).get("host")}
    if len(beats) < 2 and not pinned:
        return

    def ago(host: str) -> str:
        return f"{host} {max(now - beats[host]['lastPassMs'], 0) // 1000}s ago ({beats[host]['outcome']})"

    shown = "last passes: " + ", ".join(ago(host) for host in sorted(beats)) if beats else "no host has run a pass"
    stopped = {name: host for name, host in pinned.items()
               if host not in beats or now - beats[host]["lastPassMs"] > PINNED_HOST_FAIL_MS}
    ticking = sorted(host for host, beat in beats.items() if now - beat["lastPassMs"] <= TICKING_MS)
    free = [job["name"] for job in jobs if job["name"] not in pinned]
    if stopped:
        name, host = next(iter(stopped.items()))
        more = f" (and {len(stopped) - 1} more pinned job(s))" if len(stopped) > 1 else ""
        since = (f"has not run a pass for {(now - beats[host]['lastPassMs']) // 60_000} minute(s)" if host in beats
                 else "has never run a pass here")
        found.add("hosts", "fail", f"job {name} is pinned to host {host}, which {since}{more}; {shown}",
                  f"start the pass on {host} (sxctl cron export --install there), or: sxctl cron update "
                  f"{name} --host any")
    elif len(ticking) > 1 and free:
        found.add("hosts", "warn", f"{len(ticking)} hosts ({', '.join(ticking)}) run passes in this workspace and "
                  f"{len(free)} job(s) ({', '.join(free[:3])}{'…' if len(free) > 3 else ''}) are pinned to none: "
                  f"whichever host's pass comes first runs them (the claims keep each run at most once); {shown}",
                  f"sxctl cron update {free[0]} --host {ticking[0]}   # pin each job to the host that should run it")
    else:
        found.add("hosts", "ok", shown + (f"; {len(pinned)} pinned job(s)" if pinned else ""))
