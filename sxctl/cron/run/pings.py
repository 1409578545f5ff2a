"""Push monitoring (Healthchecks.io / Cronitor semantics): a job's `--ping-url URL` and a pass's
`cron tick --ping-url URL` are told `URL/start` when a run (or the pass) starts, `URL` when it
succeeded and `URL/fail` when it did not, with the run id and a short reason in the body — the
dead-man's switch that a pull-only `doctor`, running on the engine that may be dead, cannot be.

A ping never fails a pass and never blocks it for long: each has a short timeout, the pass a
total budget, and once an endpoint has failed in a pass the pass sends it nothing more. A ping
that failed or was not sent is kept (in this host's heartbeat, cron/run/heartbeat.py) and retried on
the next pass. A URL is never shown whole to a human (`mask_url`: the path after the host is
hidden; it is often the secret)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...errors import UsageError

DEFAULT_TIMEOUT_S = 5.0
MAX_TIMEOUT_S = 60.0
BUDGET_FACTOR = 3  # a pass spends at most this many ping timeouts on pings in all
MAX_URL_LEN = 1024
MAX_BODY_LEN = 256
MAX_PENDING = 20  # pings kept for the next pass; the oldest beyond are dropped (counted)
MAX_TRIES = 5  # a ping tried this often without success is dropped (counted)
SUFFIXES = {"start": "/start", "success": "", "fail": "/fail"}


def ping_url(url: str, kind: str) -> str:
    """Where a `kind` ping of `url` goes: `/start` or `/fail` added to its path, never after its
    query (`…/uuid?create=1` would become `…?create=1/fail`, a success ping to the monitor)."""
    from urllib.parse import urlsplit, urlunsplit  # urllib loads only for pings

    if not SUFFIXES[kind]:
        return url
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + SUFFIXES[kind]))


def sent_url_rule(url: str) -> str | None:
    """url_rule for a URL with its SUFFIXES (a kept ping, in the heartbeat)."""
    return url_rule(url, MAX_URL_LEN + max(len(suffix) for suffix in SUFFIXES.values()))


def url_rule(url: str, max_len: int = MAX_URL_LEN) -> str | None:
    """Why `url` is not a ping URL sxctl sends to (None when it is): http or https, a host, at
    most `max_len` characters, no control character or space."""
    from urllib.parse import urlsplit  # urllib loads only for pings

    if not 1 <= len(url) <= max_len:
        return f"a ping URL is 1-{max_len} characters"
    if any(ord(c) < 0x21 or 0x7F <= ord(c) <= 0x9F for c in url):
        return "a ping URL has no spaces or control characters"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError:
        return "not a URL"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "a ping URL is http:// or https:// with a host"
    if parts.fragment:
        return "a ping URL has no #fragment"
    if parts.username is not None or parts.password is not None:
        return "a ping URL has no user or password (errors would show them; a check's secret is its path)"
    return None


def check_ping_url(url: str, what: str = "--ping-url") -> str:
    """`url` when url_rule accepts it, else exit 2 naming it masked."""
    why = url_rule(url)
    if why is not None:
        raise UsageError(f"invalid {what} {mask_url(url)}: {why}")
    return url


def mask_url(url: str) -> str:
    """`https://hc-ping.com/…`: the scheme and host (no user or password); what follows is hidden."""
    from urllib.parse import urlsplit  # urllib loads only for pings

    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "…"
    host = "".join(c for c in host if c.isprintable() and c != " ")[:255]
    if parts.scheme not in ("http", "https") or not host:
        return "…"
    if ":" in host:
        host = f"[{host}]"  # an IPv6 address, as it was written
    rest = "/…" if (parts.path not in ("", "/") or parts.query) else ""
    return f"{parts.scheme}://{host}{port}{rest}"


class Answered(OSError):
    """The endpoint answered that this URL is wrong (4xx): the host is up, its other checks may be fine."""


def http_post(url: str, body: bytes, timeout: float) -> None:
    """POST `body` to `url` (text/plain), no redirect followed; raises OSError on any failure."""
    import urllib.error  # urllib loads only for pings
    import urllib.request

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None  # a 3xx is an answer, not an order to send the body elsewhere

    opener = urllib.request.build_opener(NoRedirect)
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": "text/plain; charset=utf-8",
                                              "User-Agent": "sxctl-ping"})
    try:
        with opener.open(request, timeout=timeout) as answer:
            answer.read(4096)
    except urllib.error.HTTPError as error:
        # a 4xx is about this URL (a wrong check); a 5xx, the monitor itself
        raise (Answered if 400 <= error.code < 500 else OSError)(f"HTTP {error.code}") from None
    except urllib.error.URLError as error:
        raise OSError(str(error.reason)) from None
    except (TimeoutError, ValueError) as error:
        raise OSError(str(error) or "timed out") from None


Sender = Callable[[str, bytes, float], None]


def bounded(send: Sender, url: str, body: bytes, timeout: float) -> None:
    """`send` in a daemon thread, waited for at most `timeout` (a server that trickles its answer
    byte by byte defeats a socket timeout; this does not): OSError when it failed or is late.
    Whatever goes wrong in it is an OSError, never a failed pass."""
    import threading  # loads only for pings

    failure: list[OSError] = []

    def run() -> None:
        try:
            send(url, body, timeout)
        except Answered as error:
            failure.append(error)
        except Exception as error:  # noqa: BLE001 - a ping can fail in any way; the pass goes on
            failure.append(OSError(str(error) or type(error).__name__))

    worker = threading.Thread(target=run, name="sxctl-ping", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise OSError(f"no answer within {timeout:g}s")
    if failure:
        raise failure[0]


@dataclass
class Pinger:
    """The pings of one pass: `send` each (or keep it for the next pass), `state()` for the
    heartbeat. `pending` is what the last pass on this host could not send."""

    timeout: float = DEFAULT_TIMEOUT_S
    sender: Sender | None = None  # None: http_post
    pending: list[dict[str, Any]] = field(default_factory=list)
    now_ms: Callable[[], int] = lambda: int(time.time() * 1000)
    monotonic: Callable[[], float] = time.monotonic
    sent: int = 0
    failed: int = 0
    dropped: int = 0
    last_error: str | None = None
    warnings: list[str] = field(default_factory=list)
    _spent: float = 0.0
    _dead: set[str] = field(default_factory=set)

    def ping(self, url: str, kind: str, run_id: str, reason: str) -> None:
        """Tell `url` that the run `run_id` started (`start`), succeeded (`success`) or failed (`fail`)."""
        body = f"run {run_id}: {reason}".encode("utf-8", "replace")[:MAX_BODY_LEN].decode("utf-8", "ignore")
        self._try({"url": ping_url(url, kind), "body": body, "kind": kind, "tries": 0, "firstMs": self.now_ms()})

    def retry_pending(self) -> None:
        """Send again what the last pass could not (oldest first)."""
        waiting, self.pending = self.pending, []
        for item in waiting:
            self._try(dict(item))

    def _try(self, item: dict[str, Any]) -> None:
        base = mask_url(item["url"])
        if base in self._dead or self._spent >= self.timeout * BUDGET_FACTOR:
            self._keep(item)  # this endpoint failed in this pass, or the pass's budget is spent: next pass
            return
        started = self.monotonic()
        try:
            bounded(self.sender or http_post, item["url"], item["body"].encode(), self.timeout)
        except OSError as error:
            self.failed += 1
            if not isinstance(error, Answered):  # it answered: its other checks may well be fine
                self._dead.add(base)
            said = str(error).replace(item["url"], base)  # never the whole URL
            self.last_error = f"{item['kind']} ping to {base}: {said}"[:512]
            self.warnings.append(f"{self.last_error}; it is sent again at the next pass")
            item["tries"] += 1
            self._keep(item)
        else:
            self.sent += 1
        finally:
            self._spent += self.monotonic() - started

    def _keep(self, item: dict[str, Any]) -> None:
        if item["tries"] >= MAX_TRIES:
            self.dropped += 1
            return
        self.pending.append(item)
        if len(self.pending) > MAX_PENDING:
            self.pending.pop(0)
            self.dropped += 1

    def state(self) -> dict[str, Any]:
        """What the heartbeat keeps (RECORD's `pings`): counts, the last error (masked) and the
        pings to send again."""
        return {"sent": self.sent, "failed": self.failed, "dropped": self.dropped, "lastError": self.last_error,
                "pending": self.pending[-MAX_PENDING:]}


class RecordingPinger(Pinger):
    """`cron simulate`'s pinger: records what the pass would send, sends nothing."""

    def __init__(self, now_ms: Callable[[], int], recorded: list[dict[str, Any]]) -> None:
        super().__init__(now_ms=now_ms)
        self.recorded = recorded

    def ping(self, url: str, kind: str, run_id: str, reason: str) -> None:
        self.recorded.append({"url": mask_url(url), "kind": kind, "runId": run_id, "reason": reason,
                              "atMs": self.now_ms()})

    def retry_pending(self) -> None:
        self.pending = []
