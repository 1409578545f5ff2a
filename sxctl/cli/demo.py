"""`sxctl demo`: a guided tour of every surface against the built-in agent (not built yet)."""

from __future__ import annotations

import click

from .output import emit, global_options, say

_NOT_YET = (
    "sxctl demo is not built yet: it arrives with the reference agent (`sxctl agent run`). "
    "Meanwhile try: sxctl inbox send --help"
)


@click.command("demo")
def demo() -> None:
    """Run the whole protocol live against the built-in agent (placeholder for now).

    \b
    Example:
      sxctl demo
    """
    emit({"ok": True, "built": False, "message": _NOT_YET}, lambda: say(_NOT_YET))


global_options(demo)
