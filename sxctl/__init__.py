"""sxctl: drive a running AI coding agent through the files it keeps on disk.

Nothing heavy is imported here: `sxctl inbox send` runs in shell loops.
"""

__version__ = "0.1.0"
