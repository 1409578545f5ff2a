"""Push monitoring (`--ping-url`): a local HTTP server receives the start, success and fail pings
of jobs and of passes, with their run ids; a dead or slow endpoint changes no outcome, delays a
pass by at most its timeout, and what was not sent is sent at the next pass."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.conftest import heartbeat_file, killed_at
from tests.core.cron.test_scheduling import MIN, NINE

from . import test_scheduling

sched = test_scheduling.sched  # a project at a fake time; every command's store is strictly checked

SECRET = "9f0c1d2e-secret-check-uuid"


class Endpoint(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.received: list[tuple[str, str]] = []
        self.delay = 0.0
        self.down = False
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        self.answered = threading.Event()  # a request handled to its end (or its error)

    def process_request_thread(self, request, client_address) -> None:
        super().process_request_thread(request, client_address)
        self.answered.set()

    def handle_error(self, request, client_address) -> None:
        """A pass that timed out hung up before the answer (BrokenPipeError): socketserver would
        print a traceback from this thread into whichever test's stderr is captured by then."""


class Handler(BaseHTTPRequestHandler):
    server: Endpoint

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
        time.sleep(self.server.delay)
        if self.server.down or "unknown-check" in self.path:  # a monitor having a bad minute, a wrong check
            self.send_response(404 if "unknown-check" in self.path else 503)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.server.received.append((self.path, body))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"OK")

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def endpoint():
    server = Endpoint()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def dead_url() -> str:
    """A port nothing listens on (bound, then closed)."""
    server = Endpoint()
    url = server.url
    server.server_close()
    return url


def _delivery(sched, ms: int, name: str, *args: str) -> None:
    sched.add(ms, name, "--every", "1h", "--anchor", "2026-12-01T09:00Z", "--payload", "delivery", "--text", name,
              *args)


def test_a_job_pings_start_and_success_or_fail_with_its_run_id(sched, endpoint):
    _delivery(sched, NINE - MIN, "good", "--ping-url", f"{endpoint.url}/{SECRET}")
    _delivery(sched, NINE - MIN, "bad", "--ping-url", f"{endpoint.url}/bad-{SECRET}")
    (sched.root / "deliver.sh").write_text('case "$SXCTL_JOB_NAME" in bad) exit 3;; esac; cat > /dev/null\n')
    env = sched.env(SXCTL_DELIVER_CMD=f"sh {sched.root / 'deliver.sh'}")
    result = sched.run(NINE, "cron", "tick", "--json", env=env)
    assert result.code == 0, result.err
    runs = {run["name"]: run for run in result.json()["runs"]}
    good, bad = runs["good"]["executionId"], runs["bad"]["executionId"]
    assert runs["bad"]["status"] == "failed"
    got = sorted(endpoint.received)
    assert [path for path, _ in got] == sorted([f"/{SECRET}/start", f"/{SECRET}", f"/bad-{SECRET}/start",
                                                f"/bad-{SECRET}/fail"])
    bodies = dict(got)
    assert bodies[f"/{SECRET}/start"].startswith(f"run {good}: good started (scheduled)")
    assert bodies[f"/{SECRET}"] == f"run {good}: good: completed"
    assert bodies[f"/bad-{SECRET}/fail"].startswith(f"run {bad}: bad: failed")
    beat = json.loads(heartbeat_file(sched.root).read_text())
    assert beat["pings"] == {"sent": 4, "failed": 0, "dropped": 0, "lastError": None, "pending": []}


def test_a_run_whose_pass_was_killed_after_its_start_ping_gets_its_fail_from_the_next_pass(sched, endpoint,
                                                                                          monkeypatch):
    """Its monitor got /start and never an end: the next pass records the run unknown and sends
    /fail (it sent nothing, and the monitor waited out its grace time)."""
    _delivery(sched, NINE - MIN, "job", "--ping-url", f"{endpoint.url}/{SECRET}")

    killed_at(monkeypatch, "after-dispatch", lambda: sched.run(NINE, "cron", "tick", "--json", env=sched.env(SXCTL_DELIVER_CMD="cat")))
    assert [path for path, _ in endpoint.received] == [f"/{SECRET}/start"]
    report = sched.tick(NINE + 5 * MIN)
    [lost] = report["reconciled"]["executionIds"]
    assert [path for path, _ in endpoint.received] == [f"/{SECRET}/start", f"/{SECRET}/fail"]
    assert endpoint.received[1][1] == f"run {lost}: unknown: the pass running it ended before it did"


def test_a_pass_pings_its_own_url_and_the_url_is_never_shown_whole(sched, endpoint):
    _delivery(sched, NINE - MIN, "job", "--ping-url", f"{endpoint.url}/{SECRET}")
    shown = sched.run(NINE, "cron", "show", "job")
    assert f"pings {endpoint.url}/…" in shown.out and SECRET not in shown.out
    listing = sched.run(NINE, "cron", "list", "--json")
    assert SECRET not in listing.out and listing.json()["jobs"][0]["policy"]["pingUrl"] == f"{endpoint.url}/…"
    assert SECRET in sched.policy_file.read_text()  # kept whole where the pass reads it (0600)
    upcoming = sched.run(NINE, "cron", "next", "-n", "1")
    assert f"pings {endpoint.url}/…" in upcoming.out and SECRET not in upcoming.out
    assert sched.run(NINE, "cron", "next", "--json", "-n", "1").json()["fires"][0]["pingUrl"] == f"{endpoint.url}/…"
    result = sched.run(NINE + 2 * MIN, "cron", "tick", "--ping-url", f"{endpoint.url}/pass-{SECRET}", "--json")
    assert result.code == 0
    boot = result.json()["bootId"]
    passes = [(path, body) for path, body in endpoint.received if path.startswith("/pass-")]
    assert passes == [(f"/pass-{SECRET}/start", f"run {boot}: scheduler pass started"),
                      (f"/pass-{SECRET}", f"run {boot}: 1 run(s), 0 waiting")]


@pytest.mark.parametrize("url", ["ftp://example.com/x", "file:///etc/passwd", f"http://example.com/{SECRET}\n",
                                 "http:///nohost", "javascript:alert(1)", f"http://example.com/{SECRET} x",
                                 f"http://example.com/{SECRET}#frag", "http://" + "a" * 1100,
                                 f"http://user:{SECRET}@example.com/x"])
def test_a_ping_url_that_is_not_plain_http_is_refused_and_not_echoed(sched, url):
    sched.add(NINE, "job", "--every", "1h", "--payload", "delivery", "--text", "x")
    for args in (("cron", "update", "job", "--ping-url", url), ("cron", "tick", "--ping-url", url)):
        result = sched.run(NINE, *args)
        assert result.code == 2 and "invalid --ping-url" in result.err, result.err
        assert SECRET not in result.err and "Traceback" not in result.err


def test_a_dead_endpoint_changes_no_outcome_and_its_pings_are_sent_at_the_next_pass(sched, endpoint):
    endpoint.down = True
    _delivery(sched, NINE - MIN, "job", "--ping-url", f"{endpoint.url}/{SECRET}")
    env = sched.env(SXCTL_DELIVER_CMD="cat > /dev/null")
    result = sched.run(NINE, "cron", "tick", "--json", "--ping-url", f"{endpoint.url}/pass", env=env)
    assert result.code == 0, result.err
    assert [run["status"] for run in result.json()["runs"]] == ["completed"]
    assert SECRET not in result.err and f"ping to {endpoint.url}/…" in result.err
    assert "sent again at the next pass" in result.err
    beat = json.loads(heartbeat_file(sched.root).read_text())
    assert beat["outcome"] == "ok" and beat["pings"]["failed"] == 1  # then the endpoint counts as down this pass
    assert [p["kind"] for p in beat["pings"]["pending"]] == ["start", "start", "success", "success"]
    [warned] = [c for c in sched.run(NINE, "doctor", "--json").json()["checks"] if c["check"] == "pings"]
    assert warned["status"] == "warn" and "4 ping(s) wait to be sent again" in warned["message"]
    assert f"{endpoint.url}/…" in warned["message"] and SECRET not in json.dumps(warned)
    # the fix tries the monitor's own host (the path, the secret, left out)
    assert warned["fix"].startswith(f"curl -fsS -m 10 {endpoint.url}/   # on ") and "YOUR-PING-HOST" not in warned["fix"]
    endpoint.down = False  # back: the next pass sends what was kept, then its own
    assert sched.run(NINE + MIN, "cron", "tick", "--ping-url", f"{endpoint.url}/pass", env=env).code == 0
    assert [path for path, _ in endpoint.received][:4] == ["/pass/start", f"/{SECRET}/start", f"/{SECRET}", "/pass"]
    assert json.loads(heartbeat_file(sched.root).read_text())["pings"]["pending"] == []
    assert [c for c in sched.run(NINE + MIN, "doctor", "--json").json()["checks"] if c["check"] == "pings"] == []


def test_a_slow_endpoint_delays_a_pass_by_at_most_its_timeout(sched, endpoint):
    endpoint.delay = 3.0
    _delivery(sched, NINE - MIN, "job", "--ping-url", f"{endpoint.url}/{SECRET}")
    env = sched.env(SXCTL_DELIVER_CMD="cat > /dev/null")
    started = time.monotonic()
    result = sched.run(NINE, "cron", "tick", "--json", "--ping-url", f"{endpoint.url}/pass", "--ping-timeout",
                       "0.3", env=env)
    elapsed = time.monotonic() - started
    assert result.code == 0 and [run["status"] for run in result.json()["runs"]] == ["completed"]
    assert elapsed < 0.3 + 1.5, elapsed  # one timeout; then the endpoint is not tried again this pass
    assert "no answer within 0.3s" in result.err or "timed out" in result.err  # whichever limit fires first
    assert result.err.count("ping to") == 1  # the endpoint is not tried again in this pass


def test_an_endpoint_whose_caller_hung_up_writes_nothing_into_a_later_test(sched, endpoint, capfd):
    """The pass timed out and hung up; the answer then broke its pipe in the server's thread, and
    socketserver printed the traceback into whichever test's stderr was captured by then."""
    endpoint.delay = 0.5
    _delivery(sched, NINE - MIN, "job", "--ping-url", f"{endpoint.url}/{SECRET}")
    result = sched.run(NINE, "cron", "tick", "--ping-timeout", "0.1", env=sched.env(SXCTL_DELIVER_CMD="cat"))
    assert result.code == 0
    assert endpoint.answered.wait(5)
    assert capfd.readouterr().err == ""


def test_cron_simulate_records_pings_and_sends_none(sched, endpoint):
    _delivery(sched, NINE - 60 * MIN, "job", "--ping-url", f"{endpoint.url}/{SECRET}")
    result = sched.run(NINE - 60 * MIN, "cron", "simulate", "--from", "2026-12-01T08:59Z", "--until",
                       "2026-12-01T09:01Z", "--tz", "UTC", "--json", env=sched.env(SXCTL_DELIVER_CMD="cat"))
    assert result.code == 0, result.err
    pings = result.json()["pings"]
    assert [(p["kind"], p["url"], p["atMs"]) for p in pings] == [("start", f"{endpoint.url}/…", NINE),
                                                                 ("success", f"{endpoint.url}/…", NINE)]
    assert SECRET not in result.out and endpoint.received == []
    human = sched.run(NINE - 60 * MIN, "cron", "simulate", "--from", "2026-12-01T08:59Z", "--until",
                      "2026-12-01T09:01Z", "--tz", "UTC", env=sched.env(SXCTL_DELIVER_CMD="cat"))
    assert "2 ping(s) recorded, none sent" in human.out and endpoint.received == []


def test_a_kept_ping_to_the_longest_url_leaves_a_heartbeat_doctor_trusts(sched):
    dead = dead_url()
    url = f"{dead}/" + "k" * (1024 - len(dead) - 1)
    sched.agent_at(NINE)
    sched.add(NINE - MIN, "job", "--every", "1h", "--anchor", "2026-12-01T09:00Z", "--payload", "heartbeat-event",
              "--text", "x", "--ping-url", url)
    assert sched.run(NINE, "cron", "tick").code == 0
    beat = json.loads(heartbeat_file(sched.root).read_text())
    assert {p["url"] for p in beat["pings"]["pending"]} == {url + "/start", url}
    doctor = sched.run(NINE + MIN, "doctor", "--json").json()
    [scheduler] = [c for c in doctor["checks"] if c["check"] == "scheduler"]
    assert scheduler["status"] == "ok", scheduler
    assert url not in json.dumps(doctor)


def test_start_and_fail_go_into_the_path_before_a_query(sched, endpoint):
    """`…/uuid?create=1` + `/fail` was `…?create=1/fail`: the monitor saw a success ping."""
    _delivery(sched, NINE - MIN, "bad", "--ping-url", f"{endpoint.url}/{SECRET}/?create=1")
    result = sched.run(NINE, "cron", "tick", "--json", env=sched.env(SXCTL_DELIVER_CMD="false"))
    assert result.code == 0 and result.json()["runs"][0]["status"] == "failed"
    assert sorted(path for path, _ in endpoint.received) == [f"/{SECRET}/fail?create=1", f"/{SECRET}/start?create=1"]


def test_kept_pings_are_sent_again_only_for_this_workspace_and_its_urls(sched, endpoint):
    """A heartbeat copied from another workspace (or written by hand) made the pass POST its kept
    pings: the original's monitor was told, or any URL at all."""
    _delivery(sched, NINE - MIN, "job")
    sched.tick(NINE)  # writes this host's heartbeat
    beat_path = heartbeat_file(sched.root)
    beat = json.loads(beat_path.read_text())
    kept = {"url": f"{endpoint.url}/INJECTED", "body": "run x: dispatched", "kind": "success", "tries": 0,
            "firstMs": NINE}
    beat["pings"] = {"sent": 0, "failed": 0, "dropped": 0, "lastError": None, "pending": [kept]}
    beat_path.write_text(json.dumps(beat))
    sched.tick(NINE + MIN)
    assert endpoint.received == []  # no job or pass pings that URL
    beat = json.loads(beat_path.read_text())
    beat["pings"]["pending"] = [kept]
    beat["workspace"] = "/elsewhere"
    beat_path.write_text(json.dumps(beat))
    sched.tick(NINE + 2 * MIN, "--ping-url", f"{endpoint.url}/INJECTED")
    assert [path for path, _ in endpoint.received] == ["/INJECTED/start", "/INJECTED"]  # its own, not the copy's


def test_a_check_the_monitor_refuses_does_not_hold_back_its_other_checks(sched, endpoint):
    """One endpoint that failed marked the whole host down for the pass: a wrong check URL on
    hc-ping.com kept every other check's pings from being sent."""
    _delivery(sched, NINE - MIN, "job", "--ping-url", f"{endpoint.url}/{SECRET}")
    env = sched.env(SXCTL_DELIVER_CMD="cat > /dev/null")
    assert sched.run(NINE, "cron", "tick", "--ping-url", f"{endpoint.url}/unknown-check", env=env).code == 0
    assert sorted(path for path, _ in endpoint.received) == [f"/{SECRET}", f"/{SECRET}/start"]
