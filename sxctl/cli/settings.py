"""The merged global options of one invocation, kept on the root click context (no click at
import: the plain `inbox send` fills a `Settings` itself)."""

from __future__ import annotations

from ..api.scope import SYSTEM_CLOCK, Clock

TYPE_CHECKING = False  # the plain `inbox send` loads this module: not even `typing` at run time
if TYPE_CHECKING:
    from typing import Any

    import click


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
    """The settings of the click invocation running now (or of `ctx`)."""
    if ctx is None:
        import click  # loaded already by whoever runs a click command (the plain send has none)

        ctx = click.get_current_context()
    root = ctx.find_root()
    if not isinstance(root.obj, Settings):
        root.obj = Settings()
    return root.obj
