"""Run a command as if the wall clock read INSTANT: `python tools/at_instant.py 2027-01-01T01:30:00Z
[--tz ZONE] -- COMMAND...`. The clock starts at INSTANT and runs on; every process the command
starts sees the same time (libfaketime, preloaded, at one offset from the real clock — the
`faketime` package of Debian and Ubuntu). `.ci/run` runs the quick suite so at 01:30 UTC and
across a DST change: a test that reads the wall clock must pass at any instant.

What a preloaded clock does not reach: the file system's timestamps (the kernel stamps them),
a program started with a bare environment (cron's, systemd's), the file descriptors the library
takes, and a thread's timed wait (its deadline is the kernel's). The tests that depend on those
are marked `real_time` and skipped under `SXCTL_TEST_INSTANT`, which this sets (tests/conftest.py)."""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import time
from datetime import datetime


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     usage="%(prog)s INSTANT [--tz ZONE] -- COMMAND...")
    parser.add_argument("instant", help="ISO 8601 with an offset or Z, e.g. 2027-01-01T01:30:00Z")
    parser.add_argument("--tz", help="the TZ the command runs in (default: the current one)")
    split = argv.index("--") if "--" in argv else len(argv)
    args, command = parser.parse_args(argv[:split]), argv[split + 1:]
    if not command:
        parser.error("no command to run (put it after --)")
    try:
        target = datetime.fromisoformat(args.instant.replace("Z", "+00:00"))
    except ValueError:
        parser.error(f"{args.instant!r} is not an ISO 8601 instant")
    if target.tzinfo is None:
        parser.error(f"{args.instant!r} has no offset: add Z or +HH:MM")
    faketime = shutil.which("faketime")
    if faketime is None:
        print("at_instant: `faketime` is not installed (apt-get install faketime)", file=sys.stderr)
        return 127
    offset = math.ceil(target.timestamp() - time.time())  # whole seconds: start at the instant, never before
    env = {**os.environ, "SXCTL_TEST_INSTANT": args.instant}
    if args.tz:
        env["TZ"] = args.tz
    os.execvpe(faketime, [faketime, "-f", f"{offset:+d}s", *command], env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
