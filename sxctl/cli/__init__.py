"""The `sxctl` program (the `sxctl` script and `python -m sxctl`).

`sxctl inbox send TEXT` runs in shell loops and crontabs, so its plain forms (`plain_send`) run
without loading click; every other command line goes to the click command (`root`). Both end
in `guard`, the one place that turns a run into an exit status."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    """Run sxctl and exit with the status of docs/reference/json-and-exit-codes.md "Exit codes"."""
    try:
        from . import plain_send

        args = list(sys.argv[1:] if argv is None else argv)
        plain = plain_send.parse(args)
        if plain is not None:
            from . import guard

            guard.run(args, lambda: plain_send.run(plain))
        from .root import cli

        cli.main(args=args)
    except KeyboardInterrupt:  # Ctrl-C while sxctl's modules load, before `guard` took over: as it says it
        from ..errors import ExitStatus

        sys.stderr.write("sxctl: interrupted\n")
        sys.exit(ExitStatus.INTERRUPTED)
