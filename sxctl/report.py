"""Where the core sends its notes and warnings; the CLI decides whether and how they are shown.

The core never prints: a command passes a `Reporter` and the CLI writes to stderr (or not, -q).
"""

from __future__ import annotations


class Reporter:
    """Collects notes (`sxctl: using session …`) and warnings; the base class keeps them."""

    def __init__(self) -> None:
        self.notes: list[str] = []
        self.warnings: list[str] = []
        self.details: list[str] = []

    @property
    def quiet(self) -> bool:
        """Whether notes go unseen (-q): a note that costs work to compose may be left out."""
        return False

    @property
    def heard(self) -> bool:
        """Whether warnings are heard at all: a check that can only warn may be skipped when not
        (`cron simulate`'s passes, whose own warnings nobody sees: `Unheard`)."""
        return True

    def note(self, message: str) -> None:
        self.notes.append(message)

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def detail(self, message: str) -> None:
        """Extra detail shown only with -v."""
        self.details.append(message)


class Unheard(Reporter):
    """A reporter whose warnings nobody sees (a rehearsal's passes): kept, but `heard` is False."""

    @property
    def heard(self) -> bool:
        return False
