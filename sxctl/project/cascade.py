"""The read-only SCORPIOX configuration cascade (sessions.md §8): the value the agent would see
for a key, tier by tier."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..fsio import file_stamp
from ..record import record
from ..report import Reporter
from .layout import ProjectLayout

BUILT_IN_CONFIG = {"SCORPIOX_INBOX": "1", "TOOL_SETCALLBACK": "1"}
_MAX_KEY = 64
_MAX_VALUE = 512


_ENV_FILES: dict[str, tuple[tuple[int, int, int], dict[str, str], list[str]]] = {}


def parse_env_file(path: Path, report: Reporter | None = None) -> dict[str, str]:
    """`KEY=VALUE` lines; comments, blanks and malformed lines are skipped (noted under -v).
    Parsed files are remembered by (inode, size, mtime), so an API loop re-reads only changes."""
    stamp = file_stamp(path)
    if stamp is None:
        return {}
    cached = _ENV_FILES.get(str(path))
    if cached is None or cached[0] != stamp:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return {}
        cached = (stamp, *_parse_env_text(path, text))
        _ENV_FILES[str(path)] = cached
    if report is not None:
        for note in cached[2]:
            report.detail(note)
    return cached[1]


def _parse_env_text(path: Path, text: str) -> tuple[dict[str, str], list[str]]:
    values: dict[str, str] = {}
    notes: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        key, sep, value = stripped.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or len(key) > _MAX_KEY or len(value) > _MAX_VALUE:
            notes.append(f"{path}:{number}: ignored line (no '=' or key/value too long)")
            continue
        values[key] = value
    return values, notes


@record
class ConfigValue:
    """A configuration key's resolved value, where it came from and the chain of places looked at."""

    key: str
    value: str | None
    source: str
    chain: list[dict[str, str]]

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": True, "key": self.key, "value": self.value, "source": self.source,
            "approximate": True, "chain": self.chain,
        }


def _exe_dir(environ: Mapping[str, str]) -> Path | None:
    return _exe_dir_on(environ.get("PATH", os.defpath))


@functools.lru_cache(maxsize=8)
def _exe_dir_on(search_path: str) -> Path | None:
    """The folder of the first `scorpiox`, then `sx`, on PATH (looked up once per PATH)."""
    for name in ("scorpiox", "sx"):
        found = _which(name, search_path)
        if found:
            return Path(found).parent
    return None


def _which(name: str, search_path: str) -> str | None:
    """`shutil.which` on POSIX, without importing shutil (with bz2 and lzma, about 2 ms of every
    `inbox send`)."""
    for folder in dict.fromkeys(search_path.split(os.pathsep)):
        candidate = os.path.join(folder, name)
        if folder and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def resolve_config(
    key: str,
    project: Path,
    *,
    environ: Mapping[str, str] = os.environ,
    home: Path | None = None,
    report: Reporter | None = None,
) -> ConfigValue:
    """The value SCORPIOX CODE would see for `key`, tier by tier (the last tier wins)."""
    home = home if home is not None else Path(environ.get("HOME") or os.path.expanduser("~"))
    exe_dir = _exe_dir(environ)
    file_tiers: list[Path] = []
    if exe_dir is not None:
        file_tiers.append(exe_dir / "scorpiox-env.txt")
    file_tiers += [
        home / ".claude" / "scorpiox-env.txt",
        project / ".claude" / "scorpiox-env.txt",
        ProjectLayout(project).config_file,
    ]
    layers: list[tuple[str, dict[str, str]]] = [("default", dict(BUILT_IN_CONFIG))]
    layers += [(str(path), parse_env_file(path, report)) for path in file_tiers]
    profile = environ.get("ACTIVE_PROFILE")
    for _, values in layers:
        profile = values.get("ACTIVE_PROFILE", profile)
    if "ACTIVE_PROFILE" in environ:
        profile = environ["ACTIVE_PROFILE"]
    if profile and len(profile) <= 64 and not any(c in profile for c in "/\\") and ".." not in profile:
        bases = [ProjectLayout(project).profiles, home / ".claude" / "scorpiox-env"]
        if exe_dir is not None:
            bases.append(exe_dir / "scorpiox-env")
        for base in bases:
            candidate = base / f"{profile}.txt"
            if candidate.is_file():
                layers.append((str(candidate), parse_env_file(candidate, report)))
                break
    layers.append(("env", {key: environ[key]} if key in environ else {}))
    chain = [{"source": source, "value": values[key]} for source, values in layers if key in values]
    if not chain:
        return ConfigValue(key, None, "unset", [])
    return ConfigValue(key, chain[-1]["value"], chain[-1]["source"], chain)
