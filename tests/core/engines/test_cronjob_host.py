"""A Kubernetes CronJob starts each pass in a new pod, whose host name is the pod's: the exported
CronJob sets `SXCTL_HOST` to its own name, so its passes are one host (one heartbeat, one metrics
series, a name a job can be pinned to), and doctor never offers an old export's pod to pin to."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from tests.core.cron.test_hosts import HEARTBEAT, checks, tick_on
from tests.core.cron.test_scheduling import MIN, NINE, sched  # noqa: F401 - a fixture
from tests.core.observe.test_metrics import parse


def cronjob(result) -> tuple[str, dict[str, str]]:
    """(the CronJob's name, its container's variables)."""
    doc = yaml.safe_load(result.out)
    [container] = doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    return doc["metadata"]["name"], {item["name"]: item["value"] for item in container["env"]}


def test_the_cronjobs_pods_pass_as_one_host_that_a_job_can_be_pinned_to(sched, tmp_path, monkeypatch):  # noqa: F811
    exported = sched.run(NINE, "cron", "export", "--target", "kubernetes", "--pvc", "agent-work")
    assert exported.code == 0, exported.err
    name, env = cronjob(exported)
    assert env == {"SXCTL_HOST": name} and f"--host {name}" in exported.out  # the comment says how pins work
    manifest = tmp_path / "cronjob.yaml"
    manifest.write_text(exported.out)
    validator = Path(sys.executable).with_name("kubernetes-validate")
    checked = subprocess.run([str(validator), "--strict", str(manifest)], capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0 and "passed" in checked.stdout, checked.stdout + checked.stderr
    sched.add(NINE - MIN, "nightly", "--every", "1h", "--anchor", "2026-12-01T09:00Z", *HEARTBEAT)
    assert sched.run(NINE, "cron", "update", "nightly", "--host", name).code == 0
    runs = []
    for minute, pod in enumerate((f"{name}-29412345-x7k2p", f"{name}-29412346-b9q4z", f"{name}-29412347-mm2rd")):
        monkeypatch.setattr("socket.gethostname", lambda pod=pod: pod)  # each pass in a new pod
        sched.agent_at(NINE + minute * MIN)
        ran = sched.run(NINE + minute * MIN, "cron", "tick", "--json", env=sched.env(**env))
        assert ran.code == 0, ran.err
        runs += [run["name"] for run in ran.json()["runs"]]
    assert runs == ["nightly"]  # run by a pod of its host, and once
    assert [p.name for p in (sched.root / ".scheduler" / "sxctl-tick").iterdir()] == [f"{name}.json"]
    families = parse(sched.run(NINE + 3 * MIN, "metrics").out)
    assert [labels for labels, _ in families["sxctl_cron_last_pass_age_seconds"]] == [{"host": name}]
    assert checks(sched.run(NINE + 3 * MIN, "doctor", "--json"), "hosts")[0]["status"] == "ok"


def test_an_sxctl_host_given_with_env_is_the_cronjobs_and_is_checked(project):
    given = project.run("cron", "export", "--target", "kubernetes", "--env", "SXCTL_HOST=cluster-b", "--env", "TZ=UTC")
    assert given.code == 0, given.err
    assert cronjob(given)[1] == {"SXCTL_HOST": "cluster-b", "TZ": "UTC"} and "--host cluster-b" in given.out
    bad = project.run("cron", "export", "--target", "kubernetes", "--env", "SXCTL_HOST=../tick")
    assert bad.code == 2 and "invalid --env SXCTL_HOST '../tick'" in bad.err and bad.out == ""


def test_doctor_names_the_pods_of_an_older_cronjob_and_never_offers_one_to_pin_to(sched):  # noqa: F811
    """An older export set no SXCTL_HOST: each pass left a heartbeat of its pod, and doctor told
    to pin a job to a pod that no longer exists."""
    cronjob_name = "sxctl-tick-app-1a2b3c4d"
    sched.add(NINE - MIN, "free", "--every", "1h", *HEARTBEAT)
    sched.add(NINE - MIN, "pinned", "--every", "1h", "--host", f"{cronjob_name}-29412300-q8w7e", *HEARTBEAT)
    for minute in range(3):
        tick_on(sched, f"{cronjob_name}-2941234{minute}-k{minute}z9x", NINE + minute * MIN)
    tick_on(sched, "build-1", NINE + 3 * MIN)
    doctor = sched.run(NINE + 3 * MIN, "doctor", "--json")
    [pods, hosts] = checks(doctor, "hosts")
    assert pods["status"] == "warn" and pods["message"].startswith(
        f"3 pod(s) of the Kubernetes CronJob {cronjob_name} ran passes here in the last hour, each as a host of its own")
    assert pods["fix"].startswith("sxctl cron export --target kubernetes ") and f"SXCTL_HOST={cronjob_name};" in pods[
        "fix"] and pods["fix"].endswith(f"/.scheduler/sxctl-tick/{cronjob_name}-*.json")
    assert hosts["status"] == "fail" and f"job pinned is pinned to host {cronjob_name}-29412300-q8w7e" in hosts["message"]
    assert hosts["fix"].startswith(f"sxctl cron update pinned --host {cronjob_name}   #")
    assert f"3 pod(s) of {cronjob_name}" in hosts["message"] and "-k0z9x" not in hosts["message"]
    assert sched.run(NINE + 3 * MIN, "cron", "update", "pinned", "--host", "any").code == 0
    [_, hosts] = checks(sched.run(NINE + 3 * MIN, "doctor", "--json"), "hosts")
    assert hosts["status"] == "warn" and f"2 hosts (build-1, {cronjob_name})" in hosts["message"]
    assert hosts["fix"] == "sxctl cron update free --host build-1   # pin each job to the host that should run it"
