"""What keeps `sxctl inbox send` (run from loops and crontabs) under the time of `import click`
(issue #27; docs/performance.md): its plain forms load no click at all, and of the standard
library only the few modules named here (and what they load themselves)."""

from __future__ import annotations

import json
import subprocess
import sys

#: the standard modules a plain send may load: paths, JSON, the types and enums of sxctl's modules
#: (`typing`, `enum`), times (`datetime`), a stem's pattern (`re`, `fnmatch`), the newest names
#: (`heapq`), `importlib` (sxctl's lazily loaded parts), `errno`, `fcntl` (a writer's lock on its temp file)
#: and `signal` (Ctrl-C held while the message is written)
ALLOWED = ("pathlib", "json", "typing", "enum", "datetime", "re", "fnmatch", "heapq", "contextlib", "importlib",
           "errno", "collections.abc", "math", "__future__", "fcntl", "signal")

PROBE = """
import json, sys
from sxctl.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exit_:
    print(json.dumps([exit_.code, sorted(m for m in sys.modules if m.split(".")[0] != "sxctl")]))
"""


def test_a_plain_inbox_send_loads_no_click_and_only_the_standard_modules_named(project):
    project.session(live=False)
    probe = subprocess.run([sys.executable, "-c", PROBE, "--session", "2026_09_21_quiet_euler", "inbox", "send", "hi",
                            "--no-wait", "-q"], cwd=project.root, env=project.env(), capture_output=True, text=True)
    code, loaded = json.loads(probe.stdout.strip().splitlines()[-1])
    assert code == 0, probe.stderr
    assert len(list((project.root / ".scorpiox/sessions/2026_09_21_quiet_euler/inbox").glob("*.json"))) == 1
    named = subprocess.run([sys.executable, "-c", f"import json, sys\nimport {', '.join(ALLOWED)}\n"
                            "print(json.dumps(sorted(sys.modules)))"], env=project.env(), capture_output=True,
                           text=True, check=True)
    assert sorted(set(loaded) - set(json.loads(named.stdout))) == []
    assert "click" not in loaded


def test_any_other_form_of_inbox_send_is_the_click_command(project):
    """Not a plain form (here: stdin): the click command runs it, as every other command."""
    project.session(live=False)
    probe = subprocess.run([sys.executable, "-c", PROBE, "inbox", "send", "-", "--no-wait", "-q"], input="hi",
                           cwd=project.root, env=project.env(), capture_output=True, text=True)
    code, loaded = json.loads(probe.stdout.strip().splitlines()[-1])
    assert code == 0, probe.stderr
    assert "click" in loaded
