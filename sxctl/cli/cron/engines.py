"""`sxctl cron export` and `cron handoff`: the scheduler pass on the engines teams already run,
and the way over to a comis daemon (added to the cron group by `sxctl.cli.cron`)."""

from __future__ import annotations

import click

from ...api import export_scheduler, hand_off
from ..output import Command, emit, in_workspace, reporter, say, settings
from .options import lock_wait_option


def _env_pair(ctx, param, values) -> list[tuple[str, str]]:
    """`--env NAME=VALUE` (repeated) as (NAME, VALUE) pairs; the core checks names and values."""
    pairs = []
    for given in values:
        name, sep, value = given.partition("=")
        if not sep:
            raise click.BadParameter(f"{given!r} is not NAME=VALUE", ctx=ctx, param=param)
        pairs.append((name, value))
    return pairs


@click.command("export", cls=Command, mutating=True)
@click.option("--target", type=click.Choice(["crontab", "systemd", "kubernetes"]), required=True,
              help="The engine that runs the pass every minute.")
@click.option("--install", is_flag=True, help="crontab/systemd: install it (idempotent) and print how to enable it.")
@click.option("--uninstall", is_flag=True, help="crontab/systemd: remove exactly what --install put there (systemd: "
              "and the links `systemctl enable` made), and print how to stop a timer that still runs; crontab: "
              "also the block of a project moved or deleted since (--project OLD-FOLDER).")
@click.option("--now", is_flag=True, help="systemd, with --install: also run the enable command; with --uninstall: "
              "run `systemctl disable --now` first (nothing is run where there is no systemctl).")
@click.option("--env", "env", multiple=True, metavar="NAME=VALUE", callback=_env_pair,
              help="A variable for the pass, e.g. SXCTL_DELIVER_CMD (repeatable): crontab via /usr/bin/env, "
              "systemd Environment=, kubernetes env:. A value the target cannot hold is refused (exit 2).")
@click.option("--ping-url", "ping_url", metavar="URL",
              help="The pass's `cron tick --ping-url` (push monitoring), in the configuration of every target.")
@click.option("--metrics-file", "metrics_file", type=click.Path(dir_okay=False), metavar="FILE",
              help="crontab/systemd: the pass's `cron tick --metrics-file` (node-exporter's textfile collector).")
@click.option("--log", "log", type=click.Path(dir_okay=False), metavar="FILE",
              help="crontab/systemd: the pass's `cron tick --log` (crontab default: "
              "$XDG_STATE_HOME/sxctl/tick-<project>.log). --install refuses to drop an option or --env variable the "
              "installed crontab entry has (exit 2): give it again, or --uninstall first.")
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
              help="systemd: install into DIR (default ~/.config/systemd/user, /etc/systemd/system with --system); "
              "a folder systemd does not read is enabled with `systemctl link` first.")
def export(target, install, uninstall, now, env, ping_url, metrics_file, log, system, user, image, pvc, mount,
           crontab_file, unit_dir) -> None:
    """Print a ready configuration that runs `sxctl cron tick` every minute for this project.

    Cron and systemd start the pass with a bare environment (PATH=/usr/bin:/bin, no virtual
    environment, where `python3 -m sxctl` finds no sxctl): the configuration names this
    installation's interpreter by its absolute path. The crontab entry writes its log with
    `cron tick --log` (moved to .1 at 1 MiB); systemd units are named
    sxctl-tick-<folder>-<hash of the path>. sxctl stays the at-most-once gate: an engine that
    fires twice cannot double a run.

    \b
    Examples:
      sxctl cron export --target crontab --install
      sxctl cron export --target systemd --install --now
      sxctl cron export --target systemd --uninstall --now
      sxctl cron export --target crontab --install --env SXCTL_DELIVER_CMD='notify-send sxctl "$(cat)"'
      sxctl cron export --target crontab --install --ping-url https://hc-ping.com/YOUR-UUID
      sxctl cron export --target kubernetes --pvc agent-work --image registry.example/sxctl:0.1.0 | kubectl apply -f -
    """
    result = export_scheduler(target, install=install, uninstall=uninstall, now=now, env=env, ping_url=ping_url,
                              metrics_file=metrics_file, log=log, system=system, user=user, image=image, pvc=pvc,
                              mount=mount, crontab_file=crontab_file, unit_dir=unit_dir, **in_workspace())

    def human() -> None:
        if result.action is None:
            click.echo(result.text, nl=False)
            return
        where = ", ".join(result.changed) or "nothing changed"
        say(f"{result.action} ({where})")
        for line in result.ran or []:
            say(f"ran: {line}")
        if result.enable and result.action != "uninstalled" and result.ran is None:
            say(f"enable it with: {result.enable}")
        if result.stop:
            say(f"stop the timer if it still runs: {result.stop}")
        if target == "systemd" and not system and result.action == "installed":
            say("a user timer runs while you are logged in; `loginctl enable-linger` keeps it running after "
                "logout and across reboots")

    if now and result.ran is None and (result.enable or result.stop):
        reporter().warn("systemctl is not installed here: nothing was run")
    emit(result.to_json(), human)


@click.command("handoff", cls=Command, mutating=True)
@click.option("--accept-policy-loss", is_flag=True,
              help="Hand off although comis will run some jobs differently (it ignores sxctl's policy file: "
              "maintenance windows, host pins, spend guards, --max-runs, …); each is listed.")
@click.option("--pause-affected", is_flag=True,
              help="Pause those jobs in the store first (comis's own pause: its daemon does not run them); "
              "refused while a daemon owns the workspace.")
@click.option("--crontab-file", type=click.Path(dir_okay=False), metavar="FILE",
              help="Read this file as the crontab (as `cron export --crontab-file` writes it), not `crontab -l`.")
@lock_wait_option
def handoff(accept_policy_loss, pause_affected, crontab_file, lock_wait_s) -> None:
    """Hand the workspace to a comis daemon: move sxctl's ledger aside (never deleted).

    A comis daemon rejects a ledger with sxctl's `inbox_dispatch` rows; after this it starts
    with an empty one. Refused (exit 4) while a claim is active, and while a job would run
    differently under comis — it ignores sxctl's policy file (a maintenance window, a host pin,
    a spend guard, --max-runs, active hours, …): each such job is listed with what comis does
    instead, and nothing changes without --accept-policy-loss or --pause-affected. Refused
    (exit 4 `pass_installed`) while the crontab holds this workspace's `cron tick` entry: remove
    it first (`sxctl cron export --target crontab --uninstall`). After it, `cron tick` and
    `cron run` refuse to run here (exit 4) until .scheduler/sxctl-handed-off.json is removed.

    \b
    Examples:
      sxctl cron handoff && comis daemon start
      sxctl cron handoff --pause-affected
    """
    result = hand_off(accept_policy_loss=accept_policy_loss, pause_affected=pause_affected, lock_wait=lock_wait_s,
                      crontab_file=crontab_file, clock=settings().clock, report=reporter(), **in_workspace())
    for note in result.notes:
        reporter().warn(note)
    if result.policy_loss and not result.paused:
        for row in result.policy_loss:
            reporter().warn(f"comis runs job {row['name']} differently: " + ", ".join(
                f"{s['setting']} (comis {s['comis']})" for s in row["settings"]))

    def human() -> None:
        if result.paused:
            say(f"paused in the store, which comis's daemon does not run: {', '.join(result.paused)} (resume each "
                "with comis's cron tool once its sxctl settings no longer matter)")
        say(f"moved {result.to_json()['ledger']} to {result.moved_to}" if result.moved_to
            else "no ledger to move; the daemon can start")

    emit(result.to_json(), human)
