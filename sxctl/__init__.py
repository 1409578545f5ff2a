"""sxctl: drive a running AI coding agent through the files it keeps on disk.

The public API (`from sxctl import send_message, …`) is imported lazily, on first use, so that
`import sxctl` stays cheap: `sxctl inbox send` runs in shell loops.
"""

from __future__ import annotations

from .api import _PARTS
from .version import __version__

_API = tuple(name for names in _PARTS.values() for name in names if name[0].islower())
_ERRORS = ("SxctlError", "UsageError", "NotFoundError", "ConflictError", "InvalidDataError", "WaitTimeoutError",
           "TooLateError", "SystemRefusedError", "ExitStatus", "ErrorCode")

__all__ = ["__version__", *_API, *_ERRORS]


def __getattr__(name: str):
    if name in _API:
        from . import api

        return getattr(api, name)
    if name in _ERRORS:
        from . import errors

        return getattr(errors, name)
    raise AttributeError(f"module 'sxctl' has no attribute {name!r}")
