"""sxctl's version, in a module of its own: the core (heartbeat rows, the kubernetes manifest)
and the CLI read it without importing the package root."""

__version__ = "0.1.0"
