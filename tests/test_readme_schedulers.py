"""The README's crontab line and systemd unit are run for real (their commands, in a shell)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from .conftest import REPO, now_ms


def _block(lang: str, marker: str = "") -> str:
    readme = (REPO / "README.md").read_text()
    blocks = [b for b in re.findall(rf"```{lang}\n(.*?)```", readme, re.S) if marker in b]
    assert blocks, f"README has no ```{lang} block containing {marker!r}"
    return blocks[0]


def _due_heartbeat(project) -> None:
    assert project.run("cron", "add", "ping", "--every", "1h", "--payload", "heartbeat-event", "--text", "from cron").code == 0
    path = project.root / ".scheduler" / "cron-jobs.json"
    data = json.loads(path.read_text())
    data["jobs"][0]["lifecycle"]["nextRunAtMs"] = now_ms() - 1000
    path.write_text(json.dumps(data, separators=(",", ":")) + "\n")


def _dispatched(folder) -> list[str]:
    return [json.loads(p.read_text())["text"] for p in (folder / "inbox").glob("*.json")]


def _with_python_on_path(project) -> dict:
    """`python3` on PATH must be the interpreter that has sxctl (a venv, or pyenv's)."""
    env = project.env()
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    return env


def test_crontab_line_runs(project, tmp_path):
    line = next(row for row in _block("crontab").splitlines() if row.strip() and not row.startswith("#"))
    command = line.split(None, 5)[5]  # drop the five schedule fields
    command = command.replace("/home/dev/myapp", str(project.root))
    folder = project.session()
    _due_heartbeat(project)
    env = _with_python_on_path(project)
    (project.home / ".local" / "state").mkdir(parents=True)
    result = subprocess.run(["/bin/sh", "-c", command], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert _dispatched(folder) == ["from cron"]
    log = (project.home / ".local" / "state" / "sxctl-tick.log").read_text()
    assert log.startswith("ran ping (scheduled): dispatched") and log.count("\n") == 1


def test_systemd_service_runs(project):
    service = _block("ini", "[Service]")
    timer = _block("ini", "[Timer]")
    assert "OnCalendar=minutely" in timer and "WantedBy=timers.target" in timer
    fields = dict(line.split("=", 1) for line in service.splitlines() if "=" in line and not line.startswith("#"))
    assert fields["Type"] == "oneshot"
    home = project.root.parent / "home-for-systemd"
    (home / "myapp").parent.mkdir(parents=True, exist_ok=True)
    (home / "myapp").symlink_to(project.root)
    workdir = fields["WorkingDirectory"].replace("%h", str(home))
    folder = project.session()
    _due_heartbeat(project)
    result = subprocess.run(fields["ExecStart"].split(), cwd=workdir, env=_with_python_on_path(project),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert _dispatched(folder) == ["from cron"] and result.stdout.startswith("ran ping (scheduled)")
