"""Packages whose parts load on first use: `api` offers every name from the package itself
(`from sxctl.api import send_message`), while a command loads only the parts it needs."""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # `import sxctl` loads this module: not even `typing` at run time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def lazy_parts(package: str, namespace: dict[str, Any], parts: dict[str, tuple[str, ...]]
               ) -> tuple[Callable[[str], Any], list[str]]:
    """A module `__getattr__` for `package` that imports the part defining a name when it is first
    asked for (and keeps it in `namespace`), and the package's `__all__`."""
    where = {name: part for part, names in parts.items() for name in names}

    def __getattr__(name: str) -> Any:
        part = where.get(name)
        if part is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{part}"), name)
        namespace[name] = value
        return value

    return __getattr__, [name for name in where if not name.startswith("_")]
