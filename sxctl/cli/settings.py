"""The merged global options of one invocation, kept on the root click context."""

from __future__ import annotations

from typing import Any

import click

from ..api.scope import SYSTEM_CLOCK, Clock


class Settings:
    """The merged global options of one invocation (tests pass one with a FakeClock through
    CliRunner's `obj`)."""

    project: str | None = None
    session: str | None = None
    workspace: str | None = None
    agent: str | None = None
    json: bool = False
    no_color: bool = False
    quiet: bool = False
    verbose: bool = False
    clock: Clock = SYSTEM_CLOCK

    def __init__(self, **given: Any) -> None:
        for name, value in given.items():
            if not hasattr(Settings, name):
                raise TypeError(f"Settings has no option {name!r}")
            setattr(self, name, value)

    def __repr__(self) -> str:
        return f"Settings({vars(self)!r})"


def settings(ctx: click.Context | None = None) -> Settings:
    root = (ctx or click.get_current_context()).find_root()
    if not isinstance(root.obj, Settings):
        root.obj = Settings()
    return root.obj
