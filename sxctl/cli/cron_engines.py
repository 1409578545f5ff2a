"""`sxctl cron export` and `cron handoff`: the scheduler pass on the engines teams already run,
and the way over to a comis daemon (registered on the cron group by importing this module)."""

from __future__ import annotations

import click

from .cron import cron
from .output import DURATION, emit, in_workspace, reporter, say, settings


@cron.command("export", mutating=True)
@click.option("--target", type=click.Choice(["crontab", "systemd", "kubernetes"]), required=True,
              help="The engine that runs the pass every minute.")
@click.option("--install", is_flag=True, help="crontab/systemd: install it (idempotent) and print how to enable it.")
@click.option("--uninstall", is_flag=True, help="crontab/systemd: remove exactly what --install put there.")
@click.option("--system", is_flag=True, help="systemd: a system unit (with User=) instead of a user unit.")
@click.option("--user", metavar="NAME", help="systemd --system: the User= (default: the owner of the project).")
@click.option("--image", metavar="IMAGE", help="kubernetes: an image with sxctl (default sxctl:VERSION; "
              "see the Containerfile).")
@click.option("--pvc", default="sxctl-project", show_default=True, metavar="NAME",
              help="kubernetes: the PersistentVolumeClaim that holds the project.")
@click.option("--mount", default="/project", show_default=True, metavar="PATH",
              help="kubernetes: where the project is mounted in the container.")
@click.option("--crontab-file", type=click.Path(dir_okay=False), metavar="FILE",
              help="crontab: edit FILE instead of the user's crontab (crontab -l / crontab -).")
@click.option("--unit-dir", type=click.Path(file_okay=False), metavar="DIR",
              help="systemd: install into DIR (default ~/.config/systemd/user, /etc/systemd/system with --system).")
def export(target, install, uninstall, system, user, image, pvc, mount, crontab_file, unit_dir) -> None:
    """Print a ready configuration that runs `sxctl cron tick` every minute for this project.

    The command line uses this installation's interpreter (cron's PATH has no virtual
    environment). sxctl stays the at-most-once gate: an engine that fires twice cannot double
    a run.

    \b
    Examples:
      sxctl cron export --target crontab --install
      sxctl cron export --target systemd --install   # then run the command it prints
      sxctl cron export --target kubernetes --pvc agent-work --image registry.example/sxctl:0.1.0 | kubectl apply -f -
    """
    from ..api import export_scheduler

    result = export_scheduler(target, install=install, uninstall=uninstall, system=system, user=user, image=image,
                              pvc=pvc, mount=mount, crontab_file=crontab_file, unit_dir=unit_dir, **in_workspace())

    def human() -> None:
        if result.action is None:
            click.echo(result.text, nl=False)
            return
        where = ", ".join(result.changed) or "nothing changed"
        say(f"{result.action} ({where})")
        if result.enable and result.action != "uninstalled":
            say(f"enable it with: {result.enable}")

    emit(result.to_json(), human)


@cron.command("handoff", mutating=True)
@click.option("--lock-wait", "lock_wait_s", type=DURATION, default="10", show_default=True, metavar="SECONDS",
              help="How long to wait for the store lock (then exit 4).")
def handoff(lock_wait_s) -> None:
    """Hand the workspace to a comis daemon: move sxctl's ledger aside (never deleted).

    A comis daemon rejects a ledger with sxctl's `inbox_dispatch` rows; after this it starts
    with an empty one. Refused (exit 4) while a claim is active. Stop your `cron tick` entry
    first (`sxctl cron export --target crontab --uninstall`).

    \b
    Example:
      sxctl cron handoff && comis daemon start
    """
    from ..api import hand_off

    result = hand_off(lock_wait=lock_wait_s, clock=settings().clock, report=reporter(), **in_workspace())
    emit(result.to_json(), lambda: say(f"moved {result.to_json()['ledger']} to {result.moved_to}"
                                       if result.moved_to else "no ledger to move; the daemon can start"))
